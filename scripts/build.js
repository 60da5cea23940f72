#!/usr/bin/env node
// `npm run build`: writes dist/, what production runs (docs/decisions/0014-compiled-build-and-licences.md).
// - dist/src, dist/sim: the server, the CLI and the platform simulator, each TypeScript file compiled to one
//   JavaScript file by esbuild (the transform tsx applies to the sources in development), relative `.ts` import
//   specifiers rewritten to `.js`, packages left to node_modules but Kysely and TypeBox, bundled into dist/vendor
//   (docs/decisions/0067-vendored-module-graphs.md). Type checking is `npm run typecheck`'s job.
//   The @parley/client sources the CLI imports (CLIENT_SOURCES: its server-sent events parser) are compiled the same
//   way, into dist/packages/client/src, where the CLI's rewritten import finds them.
// - dist/dashboard: the dashboard (web/, Preact) bundled by Vite.
//
// Options:
//   --if-stale             build only the parts whose inputs changed since their last build (scripts/build-stamp.js)
//   --only=server|dashboard
//   --tolerate-dashboard   a dashboard that fails to build is reported and the exit status stays 0: the API works
//                          without it and /dashboard/ then says how to build it (bin/parley.js passes this)
// Build output goes to stderr, so a command that prints JSON on stdout (`parley sim --json`) stays parseable.
// Exit status: 0 built (or nothing to do), 1 a part failed.
import { mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CLIENT_SOURCES, DIST, fingerprint, LOCK, PARTS, ROOT, readStamp, STAMP } from './build-stamp.js';

const args = process.argv.slice(2);
const ifStale = args.includes('--if-stale');
const tolerateDashboard = args.includes('--tolerate-dashboard');
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length);
if (only !== undefined && !(only in PARTS)) {
  console.error(`parley build: --only must be one of ${Object.keys(PARTS).join(', ')}`);
  process.exit(2);
}
const log = (line) => process.stderr.write(`parley build: ${line}\n`);

/** Every `.ts` file under `dir` (no `.d.ts`), as paths relative to the root. */
function sources(dir) {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/**
 * Packages bundled into dist/vendor instead of loaded from node_modules, each under the name its importers use:
 * Kysely and TypeBox ship as hundreds of small modules (262 and 247 loaded by every start, 0.8 ms of a core each on
 * the 2-core machine), and loading them was most of a CLI command's half second.
 * See docs/decisions/0067-vendored-module-graphs.md.
 */
const VENDORED = {
  kysely: 'kysely',
  '@sinclair/typebox': 'typebox',
  '@sinclair/typebox/value': 'typebox-value',
};

/**
 * esbuild plugin: every import is external (nothing is bundled; each source file becomes one output file), a
 * relative one naming a `.ts` file is rewritten to the `.js` file it compiles to, and a {@link VENDORED} package to
 * its file in dist/vendor, relative to the importer's output.
 */
const externalImports = {
  name: 'external-imports',
  setup(build) {
    build.onResolve({ filter: /.*/ }, (resolve) => {
      if (resolve.kind === 'entry-point') return undefined;
      const vendored = VENDORED[resolve.path];
      if (vendored !== undefined) {
        const from = dirname(join(DIST, relative(ROOT, resolve.importer)));
        // an import specifier is a URL path: '/' on every platform
        const path = relative(from, join(DIST, 'vendor', `${vendored}.js`))
          .split(sep)
          .join('/');
        return { path: path.startsWith('.') ? path : `./${path}`, external: true };
      }
      if (/^(kysely|@sinclair\/typebox)(\/|$)/.test(resolve.path)) {
        // another entry of a vendored package would load a second copy from node_modules beside the bundle's
        return {
          errors: [{ text: `${resolve.path} is not bundled: add it to VENDORED in scripts/build.js` }],
        };
      }
      const path = resolve.path.startsWith('.') ? resolve.path.replace(/\.ts$/, '.js') : resolve.path;
      return { path, external: true };
    });
  },
};

/**
 * Compiles src/, sim/ and CLIENT_SOURCES into dist/, after removing what an earlier build left there (a deleted
 * source's output).
 */
async function buildServer() {
  const { build } = await import('esbuild');
  for (const dir of ['src', 'sim', 'vendor', 'packages'])
    rmSync(join(DIST, dir), { recursive: true, force: true });
  await build({
    absWorkingDir: ROOT,
    entryPoints: [...sources('src'), ...sources('sim'), ...CLIENT_SOURCES],
    outdir: 'dist',
    outbase: '.',
    bundle: true,
    plugins: [externalImports],
    platform: 'node',
    format: 'esm',
    target: 'node20',
    tsconfig: 'tsconfig.json',
    logLevel: 'warning',
  });
  // One module per vendored package, the code they share in chunks (splitting), so a class TypeBox's index and
  // its `value` entry both use is one class.
  await build({
    absWorkingDir: ROOT,
    entryPoints: Object.entries(VENDORED).map(([input, output]) => ({ in: input, out: output })),
    outdir: join('dist', 'vendor'),
    bundle: true,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    legalComments: 'inline',
    logLevel: 'warning',
  });
}

/** Bundles the dashboard into dist/dashboard (web/vite.config.ts says where). */
async function buildDashboard() {
  const { build } = await import('vite');
  await build({ configFile: join(ROOT, 'web', 'vite.config.ts'), logLevel: 'warn' });
}

const builders = { server: buildServer, dashboard: buildDashboard };

/** Whether the process that holds the lock (its pid in LOCK/pid) is gone, so the lock is left over from a crash. */
function lockAbandoned() {
  try {
    const pid = Number.parseInt(readdirSync(LOCK).find((n) => /^\d+$/.test(n)) ?? '', 10);
    if (!Number.isInteger(pid)) return Date.now() - statSync(LOCK).mtimeMs > 10_000;
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return error?.code === 'ESRCH';
  }
}

/** Takes the build lock, waiting while another build holds it. */
async function lock() {
  mkdirSync(DIST, { recursive: true });
  for (let announced = false; ; ) {
    try {
      mkdirSync(LOCK);
      writeFileSync(join(LOCK, String(process.pid)), '');
      return;
    } catch (error) {
      if (error?.code !== 'EEXIST') throw error;
    }
    if (lockAbandoned()) {
      rmSync(LOCK, { recursive: true, force: true });
      continue;
    }
    if (!announced) log('waiting for another build to finish');
    announced = true;
    await sleep(200);
  }
}

await lock();
let failed = false;
try {
  const wanted = /** @type {(keyof typeof PARTS)[]} */ (only ? [only] : Object.keys(PARTS));
  // Read under the lock, so a build that finished while this one waited counts.
  const stamp = readStamp();
  const todo = ifStale ? wanted.filter((part) => stamp[part] !== fingerprint(part)) : wanted;
  for (const part of todo) {
    const inputs = fingerprint(part); // taken before building: an edit made meanwhile makes the next start rebuild
    const started = Date.now();
    log(`building the ${part}`);
    try {
      await builders[part]();
      stamp[part] = inputs;
      log(`built the ${part} in ${Date.now() - started} ms`);
    } catch (error) {
      delete stamp[part];
      const reason = error instanceof Error ? error.message : String(error);
      if (part === 'dashboard' && tolerateDashboard) {
        log(`the dashboard could not be built (${reason}); the API works, /dashboard/ says how to build it`);
      } else {
        log(`the ${part} could not be built: ${reason}`);
        failed = true;
      }
    }
    writeFileSync(`${STAMP}.tmp`, `${JSON.stringify(stamp)}\n`);
    renameSync(`${STAMP}.tmp`, STAMP);
  }
} finally {
  rmSync(LOCK, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
