import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BUILD = fileURLToPath(new URL('../../scripts/build.js', import.meta.url));

/**
 * Builds the server's part of `dist/` when its sources changed since its last build (`scripts/build.js
 * --if-stale --only=server`, a few milliseconds when nothing did), so the benchmark's parley children run what
 * `npm start` runs (bench/lib/compiled-sources.mjs). The build's output goes to this process's stderr.
 * @throws Error when the build fails (its messages are on stderr).
 */
export function buildServer(): void {
  execFileSync(process.execPath, [BUILD, '--if-stale', '--only=server'], { stdio: ['ignore', 2, 2] });
}
