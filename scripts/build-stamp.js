// What `npm run build` writes into dist/ and how to tell whether it is still current, shared by scripts/build.js
// and bin/parley.js (which rebuilds what is stale before it runs dist/). See docs/decisions/0014-compiled-build-and-licences.md.
//
// dist/ has two parts, each built from its own inputs:
// - server: src/ and sim/ compiled to JavaScript by esbuild (dist/src, dist/sim; with the client library's server-sent
//   events parser the CLI imports, dist/packages/client/src), and the packages bundled into
//   dist/vendor (Kysely, TypeBox: docs/decisions/0067-vendored-module-graphs.md);
// - dashboard: web/ bundled by Vite (dist/dashboard).
// A part is current when the fingerprint of its inputs (path, size and modification time of every file, so an edit,
// an added file and a removed file all change it; the contents of the vendored packages' package.json, so the
// version installed in node_modules counts, whatever the lock file says) equals the one dist/.build-stamp.json
// recorded when that part was last built. Computing it reads directory entries, file metadata and two small files:
// a few milliseconds.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root (the checkout). */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Where the build writes. */
export const DIST = join(ROOT, 'dist');
/** Fingerprints of the inputs each part was last built from: `{ "server": "<sha256 hex>", "dashboard": … }`. */
export const STAMP = join(DIST, '.build-stamp.json');
/** Held (a directory, created atomically) while a build runs, so concurrent starts build once. */
export const LOCK = join(DIST, '.build-lock');

/**
 * Files of packages/client the server imports, compiled beside src/ into dist/packages/client/src (each imports
 * nothing else of its package): the server-sent events parser `parley listen` shares with the client library
 * (docs/decisions/0033-listen-reads-the-stream.md).
 */
export const CLIENT_SOURCES = ['packages/client/src/sse.ts'];

/**
 * The inputs of each part: directories (walked recursively) and files, relative to the root. The build scripts are
 * inputs of both, so a change to how dist/ is made rebuilds it.
 */
export const PARTS = {
  server: ['src', 'sim', ...CLIENT_SOURCES, 'tsconfig.json', 'scripts/build.js', 'scripts/build-stamp.js'],
  dashboard: ['web', 'package-lock.json', 'scripts/build.js', 'scripts/build-stamp.js'],
};

/** Every file under `path` (a file or a directory), as absolute paths; nothing when it does not exist. */
function files(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? files(join(path, entry.name)) : [join(path, entry.name)],
  );
}

/**
 * Inputs of a part fingerprinted by their contents: the package.json of each package the server bundles into
 * dist/vendor, so the build follows the version installed (an `npm ci` after a start that built from the old
 * node_modules rebuilds; npm gives an extracted file the tarball's fixed time, so metadata would not tell).
 * @type {Partial<Record<keyof typeof PARTS, string[]>>}
 */
export const CONTENT_INPUTS = {
  server: ['node_modules/kysely/package.json', 'node_modules/@sinclair/typebox/package.json'],
};

/**
 * The fingerprint of a part's inputs: SHA-256 (hex) over `relative path, size, mtime` of each file, sorted by path,
 * then the path and contents of each of its {@link CONTENT_INPUTS} (`missing` for one that does not exist).
 * @param {keyof typeof PARTS} part
 * @returns {string}
 */
export function fingerprint(part) {
  const lines = PARTS[part]
    .flatMap((input) => files(join(ROOT, input)))
    .map((file) => {
      const { size, mtimeMs } = statSync(file);
      return `${relative(ROOT, file)}\0${size}\0${mtimeMs}`;
    })
    .sort();
  const hash = createHash('sha256').update(lines.join('\n'));
  for (const input of CONTENT_INPUTS[part] ?? []) {
    const path = join(ROOT, input);
    hash.update(`\n${input}\0`).update(existsSync(path) ? readFileSync(path) : 'missing');
  }
  return hash.digest('hex');
}

/**
 * The fingerprints recorded by the last build, `{}` when there is none or it cannot be read.
 * @returns {Partial<Record<keyof typeof PARTS, string>>}
 */
export function readStamp() {
  try {
    return JSON.parse(readFileSync(STAMP, 'utf8'));
  } catch {
    return {};
  }
}

/**
 * The parts whose inputs changed since they were last built (all of them on a fresh checkout), or every part while
 * another build holds the lock (the caller then goes through scripts/build.js, which waits for it).
 * @returns {(keyof typeof PARTS)[]}
 */
export function staleParts() {
  const parts = /** @type {(keyof typeof PARTS)[]} */ (Object.keys(PARTS));
  if (existsSync(LOCK)) return parts;
  const stamp = readStamp();
  return parts.filter((part) => stamp[part] !== fingerprint(part));
}
