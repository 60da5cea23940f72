/**
 * Module hooks for a benchmark child that runs parley's own code (`--import bench/lib/compiled-sources.mjs`, after
 * `--import tsx`): every import of a file under `src/` loads its compiled file under `dist/src/` instead, and the
 * bench's own imports of `kysely` load the copy vendored into `dist/vendor/`, so the child measures the JavaScript
 * `npm start` runs (scripts/build.js), not the development transform of tsx (which keeps every function's name
 * with a call at each closure's creation). The bench files themselves still load through tsx. The runner builds
 * `dist/` first when its sources changed (bench/lib/build.ts).
 */
import { register } from 'node:module';

register(
  'data:text/javascript,' +
    encodeURIComponent(`
const root = ${JSON.stringify(new URL('../../', import.meta.url).href)};
const src = root + 'src/';
const dist = root + 'dist/';
export async function resolve(specifier, context, next) {
  const parent = context.parentURL ?? '';
  if (specifier === 'kysely' && parent.startsWith(root + 'bench/')) {
    return { url: dist + 'vendor/kysely.js', format: 'module', shortCircuit: true };
  }
  const resolved = await next(specifier, context);
  if (resolved.url.startsWith(src) && resolved.url.endsWith('.ts')) {
    return { url: dist + 'src/' + resolved.url.slice(src.length, -3) + '.js', format: 'module', shortCircuit: true };
  }
  return resolved;
}
`),
);
