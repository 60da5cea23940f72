import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { bootstrapIfEmpty } from '../../src/admin/admin.ts';
import { main } from '../../src/cli/main.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The `parley` CLI as a user runs it (DESIGN D3): a child process of `bin/parley.js`, configured only through the
 * environment the server reads (DATA_DIR, DATABASE_URL). It works on the server's store, refuses to create one
 * that does not exist unless `--init` is given, and manages organizations' plans. `--json` answers are exactly
 * one JSON object on stdout.
 */

const BIN = fileURLToPath(new URL('../../bin/parley.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The one JSON object stdout holds (asserted to be exactly one line). */
  json: any;
}

/** Runs `parley …args` in a child process with exactly `env` on top of PATH and HOME. */
function cli(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', reject);
    child.once('close', (code) => {
      let json: unknown;
      if (args.includes('--json')) {
        const lines = stdout.split('\n').filter((line) => line !== '');
        assert.equal(lines.length, 1, `exactly one JSON line on stdout for ${args.join(' ')}: ${stdout}`);
        json = JSON.parse(lines[0] ?? '');
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/** The environment that points the CLI at `testStore`, as a server's environment would. */
function storeEnv(testStore: TestStore): Record<string, string> {
  if (testStore.database.dialect === 'sqlite') return { DATA_DIR: testStore.dataDir };
  return { DATA_DIR: testStore.dataDir, DATABASE_URL: postgresUrl(testStore.schema ?? 'public') };
}

/** TEST_DATABASE_URL with `search_path` set to `schema` (how an operator puts parley in its own schema). */
function postgresUrl(schema: string): string {
  const url = new URL(process.env.TEST_DATABASE_URL ?? '');
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

async function organizationRow(testStore: TestStore, name: string) {
  return testStore.store.db
    .selectFrom('organizations')
    .select(['name', 'plan', 'per_minute', 'per_day'])
    .where('name', '=', name)
    .executeTakeFirst();
}

for (const dialect of testDialects()) {
  describe(`parley CLI and its store (${dialect})`, () => {
    it('refuses a store that does not exist, saying which it looked for; --init creates it', async () => {
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

        const refused = await cli(env, 'org', 'list', '--json');
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

        const human = await cli(env, 'instance', 'list', '--org', 'default');
        assert.equal(human.code, 1);
        assert.equal(human.stdout, '', 'errors go to stderr without --json');
        assert.match(human.stderr, /^parley: (no parley store at|the PostgreSQL database)/);
        assert.equal(await created(), false);

        const init = await cli(env, '--init', 'org', 'list', '--json');
        assert.equal(init.code, 0, init.stderr);
        assert.deepEqual(init.json, { organizations: [] });
        assert.equal(await created(), true, '--init created the store');

        const again = await cli(env, 'org', 'list', '--json');
        assert.equal(again.code, 0, 'an existing store needs no --init');
        const missingOrg = await cli(env, 'key', 'list', '--org', 'default', '--json');
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

    it("reads the server's store through the server's settings (DATA_DIR / DATABASE_URL)", async () => {
      const testStore = await createTestStore(dialect);
      try {
        const boot = await bootstrapIfEmpty(testStore.store.db);
        assert.ok(boot);
        const env = storeEnv(testStore);
        const orgs = await cli(env, 'org', 'list', '--json');
        assert.equal(orgs.code, 0, orgs.stderr);
        assert.deepEqual(orgs.json, {
          organizations: [{ id: boot.org.id, name: 'default', plan: 'free', perMinute: null, perDay: null }],
        });
        const instances = await cli(env, 'instance', 'list', '--org', 'default', '--json');
        assert.deepEqual(
          instances.json.instances.map((i: { id: string; name: string }) => [i.id, i.name]),
          [[boot.instance.id, 'sandbox']],
        );
        const human = await cli(env, 'org', 'list');
        assert.equal(human.stdout, `${boot.org.id}  default  free\n`);
      } finally {
        await testStore.cleanup();
      }
    });

    it('creates, updates and lists plans; enterprise needs both limits, free and pro refuse them', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const env = storeEnv(testStore);
        const refusals: [string[], RegExp][] = [
          [
            ['org', 'create', '--name', 'big', '--plan', 'enterprise'],
            /^--plan enterprise needs its own limits: add --per-minute and --per-day/,
          ],
          [
            ['org', 'create', '--name', 'big', '--plan', 'enterprise', '--per-minute', '100'],
            /^--plan enterprise needs its own limits: add --per-day \(/,
          ],
          [
            ['org', 'create', '--name', 'big', '--plan', 'pro', '--per-day', '100'],
            /^--per-day applies to the enterprise plan only \(pro has fixed limits\)$/,
          ],
        ];
        // Refusals change nothing, so they run side by side.
        const refused = await Promise.all(refusals.map(([args]) => cli(env, ...args, '--json')));
        for (const [index, [args, pattern]] of refusals.entries()) {
          assert.equal(refused[index]?.code, 1, args.join(' '));
          assert.match(refused[index]?.json.error, pattern);
        }
        assert.equal(await organizationRow(testStore, 'big'), undefined, 'no refused org was stored');

        const created = await cli(
          env,
          'org',
          'create',
          '--name',
          'big',
          '--plan',
          'enterprise',
          '--per-minute',
          '100',
          '--per-day',
          '5000',
          '--json',
        );
        assert.equal(created.code, 0, created.stderr);
        assert.deepEqual(
          { ...created.json, id: typeof created.json.id },
          { id: 'string', name: 'big', plan: 'enterprise', perMinute: 100, perDay: 5000 },
        );
        assert.deepEqual(await organizationRow(testStore, 'big'), {
          name: 'big',
          plan: 'enterprise',
          per_minute: 100,
          per_day: 5000,
        });

        const oneLimit = await cli(env, 'org', 'update', 'big', '--per-day', '6000', '--json');
        assert.equal(oneLimit.code, 0, oneLimit.stderr);
        assert.deepEqual(oneLimit.json, {
          id: created.json.id,
          name: 'big',
          plan: 'enterprise',
          perMinute: 100,
          perDay: 6000,
        });

        const badUpdates: [string[], RegExp][] = [
          [
            ['org', 'update', 'big', '--plan', 'pro', '--per-minute', '5'],
            /--per-minute applies to the enterprise plan only/,
          ],
          [['org', 'update', 'big', '--plan', 'gold'], /^--plan must be one of free, pro, enterprise$/],
          [['org', 'update', 'big'], /^nothing to change: give --plan, --per-minute or --per-day$/],
          [['org', 'update', 'nobody', '--plan', 'pro'], /^organization "nobody" not found$/],
          [['org', 'update', 'big', '--per-day', '0'], /^--per-day must be a positive integer$/],
        ];
        const rejected = await Promise.all(badUpdates.map(([args]) => cli(env, ...args, '--json')));
        for (const [index, [args, pattern]] of badUpdates.entries()) {
          assert.equal(rejected[index]?.code, 1, args.join(' '));
          assert.match(rejected[index]?.json.error, pattern);
        }
        assert.deepEqual(await organizationRow(testStore, 'big'), {
          name: 'big',
          plan: 'enterprise',
          per_minute: 100,
          per_day: 6000,
        });

        const toPro = await cli(env, 'org', 'update', created.json.id, '--plan', 'pro', '--json');
        assert.deepEqual(toPro.json, {
          id: created.json.id,
          name: 'big',
          plan: 'pro',
          perMinute: null,
          perDay: null,
        });
        assert.deepEqual(await organizationRow(testStore, 'big'), {
          name: 'big',
          plan: 'pro',
          per_minute: null,
          per_day: null,
        });

        const noLimits = await cli(
          env,
          'org',
          'update',
          'big',
          '--plan',
          'enterprise',
          '--per-minute',
          '7',
          '--json',
        );
        assert.equal(noLimits.code, 1);
        assert.match(noLimits.json.error, /^--plan enterprise needs its own limits: add --per-day/);

        const back = await cli(
          env,
          'org',
          'update',
          'big',
          '--plan',
          'enterprise',
          '--per-minute',
          '7',
          '--per-day',
          '70',
        );
        assert.equal(back.code, 0, back.stderr);
        assert.equal(
          back.stdout,
          `organization big updated: ${created.json.id}  big  enterprise 7/min 70/day\n`,
        );

        await cli(env, 'org', 'create', '--name', 'small', '--json');
        const list = await cli(env, 'org', 'list', '--json');
        assert.deepEqual(
          list.json.organizations.map((o: Record<string, unknown>) => ({ ...o, id: typeof o.id })),
          [
            { id: 'string', name: 'big', plan: 'enterprise', perMinute: 7, perDay: 70 },
            { id: 'string', name: 'small', plan: 'free', perMinute: null, perDay: null },
          ],
        );
      } finally {
        await testStore.cleanup();
      }
    });
  });
}

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
