import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { bootstrapIfEmpty } from '../../src/app/bootstrap.ts';
import { main } from '../../src/cli/main.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { cli, postgresUrl, storeEnv } from './support.ts';

/**
 * The `parley` CLI as a user runs it (docs/cli.md): a child process of `bin/parley.js`, configured only through the
 * environment the server reads (DATA_DIR, DATABASE_URL). It works on the server's store, refuses to create one
 * that does not exist unless `--init` is given. `--json` answers are exactly one JSON object on stdout. Plans:
 * plans.test.ts.
 */

// Each run starts a process: the dialects' tests run concurrently.
describe('parley CLI and its store', { concurrency: true }, () => {
  for (const dialect of testDialects()) {
    it(`refuses a store that does not exist, saying which it looked for; --init creates it (${dialect})`, async () => {
      let env: Record<string, string>;
      let created: () => Promise<boolean>;
      const dataDir = mkdtempSync(join(tmpdir(), 'parley-cli-'));
      const client =
        dialect === 'postgres'
          ? new pg.Client({ connectionString: process.env.TEST_DATABASE_URL })
          : undefined;
      try {
        if (client) {
          await client.connect();
          const schema = `t_${randomBytes(6).toString('hex')}`;
          await client.query(`create schema ${schema}`);
          env = { DATA_DIR: dataDir, DATABASE_URL: postgresUrl(schema) };
          created = async () =>
            Number(
              (
                await client.query(
                  'select count(*) as n from information_schema.tables where table_schema = $1',
                  [schema],
                )
              ).rows[0].n,
            ) > 0;
        } else {
          env = { DATA_DIR: dataDir };
          created = async () => existsSync(join(dataDir, 'parley.db'));
        }

        // Both refused, so they run side by side.
        const [refused, human] = await Promise.all([
          cli(env, 'org', 'list', '--json'),
          cli(env, 'instance', 'list', '--org', 'default'),
        ]);
        assert.equal(refused.code, 1, refused.stderr);
        const message: string = refused.json.error;
        assert.deepEqual(Object.keys(refused.json), ['error']);
        if (dialect === 'sqlite') {
          assert.match(message, new RegExp(`^no parley store at ${join(dataDir, 'parley.db')}\\. `));
          assert.ok(message.includes(`DATA_DIR resolves to ${dataDir};`), message);
        } else {
          assert.match(
            message,
            /^the PostgreSQL database postgres:\/\/.* has no parley tables \(its migrations were never applied\)/,
          );
          assert.ok(message.includes('DATABASE_URL is set'), message);
        }
        assert.match(message, /DATA_DIR/);
        assert.match(message, /DATABASE_URL/);
        assert.match(message, /pass --init/);
        assert.equal(await created(), false, 'nothing was created');

        assert.equal(human.code, 1);
        assert.equal(human.stdout, '', 'errors go to stderr without --json');
        assert.match(human.stderr, /^parley: (no parley store at|the PostgreSQL database)/);
        assert.equal(await created(), false);

        const init = await cli(env, '--init', 'org', 'list', '--json');
        assert.equal(init.code, 0, init.stderr);
        assert.deepEqual(init.json, { organizations: [] });
        assert.equal(await created(), true, '--init created the store');

        const [again, missingOrg] = await Promise.all([
          cli(env, 'org', 'list', '--json'),
          cli(env, 'key', 'list', '--org', 'default', '--json'),
        ]);
        assert.equal(again.code, 0, 'an existing store needs no --init');
        assert.equal(missingOrg.code, 1);
        assert.match(
          missingOrg.json.error,
          /organization "default" not found: this store has no organizations yet/,
        );
      } finally {
        await client?.end();
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    it(`reads the server's store through the server's settings, DATA_DIR / DATABASE_URL (${dialect})`, async () => {
      const testStore = await createTestStore(dialect);
      try {
        const boot = await bootstrapIfEmpty(testStore.store.db);
        assert.ok(boot);
        const env = storeEnv(testStore);
        // Read-only commands, run side by side.
        const [orgs, instances, human] = await Promise.all([
          cli(env, 'org', 'list', '--json'),
          cli(env, 'instance', 'list', '--org', 'default', '--json'),
          cli(env, 'org', 'list'),
        ]);
        assert.equal(orgs.code, 0, orgs.stderr);
        assert.deepEqual(orgs.json, {
          organizations: [
            {
              id: boot.org.id,
              name: 'default',
              plan: 'free',
              perMinute: null,
              perDay: null,
              maxInstances: null,
            },
          ],
        });
        assert.deepEqual(
          instances.json.instances.map((i: { id: string; name: string }) => [i.id, i.name]),
          [[boot.instance.id, 'sandbox']],
        );
        assert.equal(human.stdout, `${boot.org.id}  default  free\n`);
      } finally {
        await testStore.cleanup();
      }
    });
  }
});

describe('parley org list with a DATABASE_URL that cannot be used', () => {
  // In-process (no process start per case): the message names the cause and the setting, as `parley serve` does
  // (docs/deploy.md "Start-up errors"), never the request-time "unavailable right now; retry shortly".
  async function orgList(url: string) {
    const err: string[] = [];
    const code = await main(['node', 'parley', 'org', 'list'], {
      out: () => undefined,
      err: (text) => err.push(text),
      env: { DATABASE_URL: url },
    });
    return { code, stderr: err.join('\n') };
  }
  const base = () => new URL(process.env.TEST_DATABASE_URL ?? '');

  it('an unreachable server, the password masked', async () => {
    const result = await orgList('postgres://parley:s3cretpw@127.0.0.1:1/parley');
    assert.equal(result.code, 1);
    assert.equal(
      result.stderr,
      'parley: cannot reach PostgreSQL database postgres://parley:***@127.0.0.1:1/parley (ECONNREFUSED): ' +
        'start PostgreSQL or set DATABASE_URL to a reachable server',
    );
  });

  it('a database that does not exist', { skip: !process.env.TEST_DATABASE_URL }, async () => {
    const url = base();
    url.pathname = `/parley_missing_${randomBytes(4).toString('hex')}`;
    const result = await orgList(url.toString());
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /^parley: PostgreSQL database postgres:\/\/.*\/parley_missing_[0-9a-f]{8} does not exist: create it \(createdb\)/,
    );
  });

  it('a refused sign-in', { skip: !process.env.TEST_DATABASE_URL }, async () => {
    const url = base();
    url.username = `nobody_${randomBytes(4).toString('hex')}`;
    url.password = 'pw-not-shown';
    const result = await orgList(url.toString());
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /^parley: PostgreSQL database postgres:\/\/nobody_[0-9a-f]{8}:\*\*\*@.* refused the sign-in/,
    );
    assert.match(result.stderr, /fix the user or password in DATABASE_URL$/);
    assert.ok(!result.stderr.includes('pw-not-shown'));
  });
});

describe('parley --help', () => {
  // In-process: the same commander program the binary runs, without a process start per page.
  async function help(...args: string[]) {
    const out: string[] = [];
    const code = await main(['node', 'parley', ...args, '--help'], {
      out: (s) => out.push(s),
      err: (s) => out.push(s),
      env: {},
    });
    return { code, text: out.join('\n') };
  }

  it('gives every command a description and examples that use it', async () => {
    const commands = [
      ['serve'],
      ['listen'],
      ['org'],
      ['org', 'create'],
      ['org', 'list'],
      ['org', 'update'],
      ['instance'],
      ['instance', 'create'],
      ['instance', 'list'],
      ['key'],
      ['key', 'create'],
      ['key', 'list'],
      ['key', 'revoke'],
    ];
    const top = await help();
    assert.equal(top.code, 0);
    assert.match(top.text, /\nExamples:\n {2}\$ npx parley /);
    assert.match(top.text, /--init/);
    for (const command of commands) {
      const page = await help(...command);
      const name = command.join(' ');
      assert.equal(page.code, 0, name);
      assert.match(page.text, new RegExp(`^Usage: parley ${name} `), name);
      const description = page.text.split('\n')[2] ?? '';
      assert.ok(description.length > 15, `${name} has a description: "${description}"`);
      assert.match(
        page.text,
        new RegExp(`\\nExamples:\\n {2}\\$ (\\S+=\\S+ )*npx parley ${name}( |\\n)`),
        name,
      );
    }
  });
});
