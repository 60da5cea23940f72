import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { staticRoutes } from '../../src/http/routes/dashboard/static.ts';

describe('dashboard page serving', () => {
  it('without a bundle: /dashboard/ answers 503 with how to build it; / and /dashboard redirect', async () => {
    const app = Fastify();
    await app.register(staticRoutes, { root: mkdtempSync(join(tmpdir(), 'parley-nobundle-')) });
    const page = await app.inject({ url: '/dashboard/' });
    assert.equal(page.statusCode, 503);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(page.body, /The dashboard is not built/);
    assert.match(page.body, /npm run build:dashboard/);
    for (const url of ['/', '/dashboard']) {
      const redirect = await app.inject({ url });
      assert.equal(redirect.statusCode, 302);
      assert.equal(redirect.headers.location, '/dashboard/');
    }
    await app.close();
  });

  it('with a bundle: serves index.html (revalidated) and hashed assets (cached a year)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'parley-bundle-'));
    writeFileSync(join(root, 'index.html'), '<!doctype html><title>parley dashboard</title>');
    writeFileSync(join(root, 'app-abc123.js'), 'console.log(1)');
    const app = Fastify();
    await app.register(staticRoutes, { root });
    const page = await app.inject({ url: '/dashboard/' });
    assert.equal(page.statusCode, 200);
    assert.equal(page.body, '<!doctype html><title>parley dashboard</title>');
    assert.equal(page.headers['cache-control'], 'no-cache');
    assert.equal(
      page.headers['content-security-policy'],
      "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    assert.equal(page.headers['x-frame-options'], 'DENY');
    const asset = await app.inject({ url: '/dashboard/app-abc123.js' });
    assert.equal(asset.statusCode, 200);
    assert.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal((await app.inject({ url: '/dashboard/missing.js' })).statusCode, 404);
    await app.close();
  });
});
