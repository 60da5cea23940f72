import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * parley's version: the `version` of the nearest `package.json` named `parley` above this module (the
 * repository's, or the installed package's; the same file from the sources and from a compiled build).
 * @throws Error when no such package.json is found (a broken installation).
 */
export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'parley' && typeof pkg.version === 'string') return pkg.version;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the package.json of parley');
    dir = parent;
  }
}
