import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

/**
 * Where `npm run build` (run by `npm start` when stale) writes the dashboard bundle: `dist/dashboard` of the
 * checkout. Run from the sources (src/…/static.ts, four levels below the checkout) that is `../../../../dist/dashboard`;
 * compiled (dist/src/…/static.js, four levels below dist/) the bundle is beside the compiled server, `../../../../dashboard`
 * (docs/decisions/0014-compiled-build-and-licences.md).
 */
export const DASHBOARD_DIST = fileURLToPath(
  new URL(
    import.meta.url.endsWith('.ts') ? '../../../../dist/dashboard/' : '../../../../dashboard/',
    import.meta.url,
  ),
);

/** The page answered while the bundle does not exist, with how to build it. */
const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>parley dashboard</title></head>
<body><main><h1>The dashboard is not built</h1>
<p>This server found no dashboard bundle in <code>dist/dashboard</code>. Build it with
<code>npm run build:dashboard</code> (<code>npm start</code> does this before starting), then reload.</p>
<p>The API works without it: see <a href="/docs">/docs</a>.</p></main></body></html>
`;

/**
 * The page's Content Security Policy: its own scripts, styles and API only, QR codes as `data:` images, never
 * framed (clickjacking), forms posting nowhere else.
 */
const CSP = [
  "default-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Serves the dashboard's single page and its assets from `root` under `/dashboard/` with @fastify/static
 * (docs/decisions/0022-dashboard.md), `/dashboard` and `/` redirecting there. Without a bundle, `/dashboard/` answers
 * 503 with a page saying how to build it instead of failing at boot.
 */
export async function staticRoutes(app: FastifyInstance, options: { root?: string }): Promise<void> {
  const root = options.root ?? DASHBOARD_DIST;
  const dashboard = { dashboard: 'public' } as const;
  app.get('/', { config: dashboard, schema: { hide: true } }, async (_request, reply) =>
    reply.redirect('/dashboard/', 302),
  );
  app.get('/dashboard', { config: dashboard, schema: { hide: true } }, async (_request, reply) =>
    reply.redirect('/dashboard/', 302),
  );
  if (!existsSync(`${root}/index.html`)) {
    app.get('/dashboard/', { config: dashboard, schema: { hide: true } }, async (_request, reply) =>
      reply.code(503).type('text/html; charset=utf-8').send(NOT_BUILT),
    );
    return;
  }
  await app.register(fastifyStatic, {
    root,
    prefix: '/dashboard/',
    index: 'index.html',
    schemaHide: true,
    decorateReply: false,
    cacheControl: false,
    // Built file names carry a content hash: cache them; the page itself is revalidated every time.
    setHeaders: (res, path) => {
      const page = path.endsWith('.html');
      res.setHeader('cache-control', page ? 'no-cache' : 'public, max-age=31536000, immutable');
      res.setHeader('x-content-type-options', 'nosniff');
      if (page) {
        res.setHeader('content-security-policy', CSP);
        res.setHeader('x-frame-options', 'DENY');
        res.setHeader('referrer-policy', 'same-origin');
      }
    },
  });
}
