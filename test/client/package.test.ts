import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { builtClient } from '../support/client.ts';

/**
 * packages/client/package.json describes what its build emits (docs/decisions/0032-client-library.md): an ESM package
 * whose `exports` name the built JavaScript and its declarations, with no runtime dependencies, under parley's
 * licence and Node.js range.
 */
const ROOT = resolve(import.meta.dirname, '../..');

interface PackageJson {
  name: string;
  type: string;
  license: string;
  engines: { node: string };
  exports: Record<string, { types?: string; default?: string } | string>;
  files: string[];
  scripts: Record<string, string>;
  dependencies?: Record<string, string>;
}

const read = (path: string) => JSON.parse(readFileSync(join(ROOT, path), 'utf8')) as PackageJson;

describe('the @parley/client package', () => {
  it('exports the files its build writes, ESM, no dependencies, the licence and engines of parley', async () => {
    const pkg = read('packages/client/package.json');
    const root = read('package.json');
    assert.equal(pkg.name, '@parley/client');
    assert.equal(pkg.type, 'module');
    assert.equal(pkg.license, root.license);
    assert.deepEqual(pkg.engines, root.engines);
    assert.deepEqual(pkg.dependencies ?? {}, {});
    assert.equal(pkg.scripts.build, 'tsc -p tsconfig.json');
    assert.ok(pkg.files.includes('dist/') && pkg.files.includes('LICENSE'));
    assert.ok(existsSync(join(ROOT, 'packages/client/LICENSE')));
    const entry = pkg.exports['.'];
    assert.ok(typeof entry === 'object');
    const { outDir, module } = await builtClient();
    for (const target of [entry.types ?? '', entry.default ?? '']) {
      assert.ok(target.startsWith('./dist/'), `${target} is in dist/`);
      assert.ok(existsSync(join(outDir, target.slice('./dist/'.length))), `the build writes ${target}`);
    }
    assert.equal(typeof module.createParleyClient, 'function');
    assert.equal(typeof module.verifyWebhook, 'function');
  });

  it('is left out of the server package: the root `files` list names no packages/ path', () => {
    assert.deepEqual(
      read('package.json').files.filter((path) => path.startsWith('packages')),
      [],
    );
  });
});
