import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { createTestStore, type TestDialect, testDialects } from '../support/store.ts';
import { cli, storeEnv } from './support.ts';

/**
 * Values the columns cannot hold are refused as field errors, with the same rule on SQLite as on PostgreSQL (whose
 * driver would otherwise fail with a raw error and a stack trace): limits up to 2^31 - 1, organization names up to
 * 200 characters, key names up to 60 (docs/cli.md).
 */
async function bounds(dialect: TestDialect) {
  const testStore = await createTestStore(dialect);
  try {
    const env = storeEnv(testStore);
    assert.equal((await cli(env, 'org', 'create', '--name', 'acme', '--json')).code, 0);
    const enterprise = ['org', 'create', '--name', 'big', '--plan', 'enterprise'];
    const cases: [string[], string][] = [
      [
        [...enterprise, '--per-minute', '5', '--per-day', '3000000000'],
        '--per-day must be a positive integer up to 2147483647',
      ],
      [
        [...enterprise, '--per-minute', '2147483648', '--per-day', '5'],
        '--per-minute must be a positive integer up to 2147483647',
      ],
      [
        [...enterprise, '--per-minute', '5', '--per-day', '5', '--max-instances', '2147483648'],
        '--max-instances must be a positive integer up to 2147483647',
      ],
      [
        ['org', 'update', 'acme', '--plan', 'enterprise', '--per-minute', '5', '--per-day', '3000000000'],
        '--per-day must be a positive integer up to 2147483647',
      ],
      [['org', 'create', '--name', 'n'.repeat(201)], '--name must be at most 200 characters (got 201)'],
      [
        ['key', 'create', '--org', 'acme', '--env', 'test', '--name', 'k'.repeat(61)],
        '--name must be at most 60 characters (got 61)',
      ],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(env, ...args, '--json')));
    for (const [index, [args, message]] of cases.entries()) {
      const result = results[index];
      assert.equal(result?.code, 1, `${args.join(' ')}: ${result?.stderr}`);
      assert.deepEqual(result?.json, { error: message }, args.join(' '));
      assert.equal(result?.stderr, '', 'no stack trace');
    }
    // The largest values are kept.
    const largest = await cli(
      env,
      ...enterprise,
      '--per-minute',
      '2147483647',
      '--per-day',
      '2147483647',
      '--json',
    );
    assert.equal(largest.code, 0, largest.stderr);
    const longest = await Promise.all([
      cli(env, 'org', 'create', '--name', 'n'.repeat(200), '--json'),
      cli(env, 'key', 'create', '--org', 'acme', '--env', 'test', '--name', 'k'.repeat(60), '--json'),
    ]);
    assert.deepEqual(
      longest.map((r) => r.code),
      [0, 0],
      longest.map((r) => r.stderr).join('\n'),
    );
    const orgs = await testStore.store.db.selectFrom('organizations').select(['name', 'per_day']).execute();
    assert.deepEqual(orgs.map((o) => o.name).sort(), ['acme', 'big', 'n'.repeat(200)]);
  } finally {
    await testStore.cleanup();
  }
}

describe('CLI: values the store cannot hold (docs/cli.md)', () => {
  for (const dialect of testDialects()) {
    it(`limits and names past their columns are refused as field errors (${dialect})`, () => bounds(dialect));
  }

  it('a fault no command maps ends in one line and exit 1, never a stack trace', async () => {
    const run = async (json: boolean) => {
      const out: string[] = [];
      const err: string[] = [];
      const args = ['node', 'parley', 'user', 'reset-password', '--email', 'a@b.c', '--password-stdin'];
      const code = await main(json ? [...args, '--json'] : args, {
        out: (text) => out.push(text),
        err: (text) => err.push(text),
        env: {},
        stdin: () => Promise.reject(new Error('stdin broke')),
      });
      return { code, out, err };
    };
    assert.deepEqual(await run(false), { code: 1, out: [], err: ['parley: unexpected error: stdin broke'] });
    assert.deepEqual(await run(true), {
      code: 1,
      out: ['{"error":"unexpected error: stdin broke"}'],
      err: [],
    });
  });
});
