import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The module @parley/client exports (its types, from the sources; its code, from the build). */
export type ClientModule = typeof import('../../packages/client/src/index.ts');

const ROOT = resolve(import.meta.dirname, '../..');

let built: Promise<{ module: ClientModule; outDir: string }> | undefined;

/**
 * @parley/client as integrators get it: the package compiled by its own build (`tsc -p packages/client`, the
 * `build` script of packages/client/package.json) and imported from the JavaScript it wrote. The output goes to a
 * temporary folder of this process instead of packages/client/dist, so test processes running side by side never
 * read each other's half-written files. Built once per process.
 * @throws Error with the compiler's output when the build fails.
 */
export function builtClient(): Promise<{ module: ClientModule; outDir: string }> {
  built ??= (async () => {
    const outDir = mkdtempSync(join(tmpdir(), 'parley-client-dist-'));
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = spawnSync(process.execPath, [tsc, '-p', 'packages/client', '--outDir', outDir], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`the client build failed:\n${result.stdout}${result.stderr}`);
    const module = (await import(pathToFileURL(join(outDir, 'index.js')).href)) as ClientModule;
    return { module, outDir };
  })();
  return built;
}
