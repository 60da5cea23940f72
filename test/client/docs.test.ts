import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';

/**
 * docs/client.md shows the example files of packages/client/examples (type-checked by `npm run typecheck`) and its sh
 * blocks run them (test/docs): each ```ts block marked `<!-- file: PATH -->` must be that file, byte for byte, so the
 * page shows exactly what runs; every example file is shown.
 */
const ROOT = resolve(import.meta.dirname, '../..');

describe('docs/client.md shows the client examples as they are', () => {
  it('every marked ts block equals its file, and every example is shown', () => {
    const page = readFileSync(join(ROOT, 'docs/client.md'), 'utf8');
    const shown = [...page.matchAll(/^<!-- file: (\S+) -->\n```ts\n([\s\S]*?)^```$/gm)];
    for (const [, path = '', code = ''] of shown) {
      assert.equal(code, readFileSync(join(ROOT, path), 'utf8'), `docs/client.md shows ${path} as it is`);
    }
    const examples = readdirSync(join(ROOT, 'packages/client/examples'))
      .filter((name) => name.endsWith('.ts'))
      .map((name) => `packages/client/examples/${name}`)
      .sort();
    assert.deepEqual(shown.map(([, path]) => path).sort(), examples);
    assert.equal(
      [...page.matchAll(/^```ts$/gm)].length,
      shown.length,
      'every ts block of the page is an example file (a snippet that does not run is a text block)',
    );
  });
});
