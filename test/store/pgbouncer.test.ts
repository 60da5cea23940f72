import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { freePort } from '../support/ports.ts';
import type { TestStore } from '../support/store.ts';
import { testDialects } from '../support/store.ts';
import { until } from '../webhooks/child.ts';

/**
 * parley behind a real PgBouncer in transaction mode (Debian's pgbouncer 1.18, which carries no prepared
 * statements): each transaction may get another server session, so a statement prepared in one is missing from
 * the next (docs/decisions/0055-named-statements.md, docs/deploy.md). With the default setting, parley turns its
 * prepared statements off at the first sign and every send is stored once; with `DATABASE_PREPARED_STATEMENTS=off`
 * nothing ever fails. Defined where PgBouncer is installed (scripts/test.js reports it as not run otherwise).
 */

const PGBOUNCER = process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer';

/** PgBouncer in transaction mode in front of `database` on the test server, listening on `port`. */
function bouncerConfig(dir: string, port: number, server: URL, database: string): string {
  const host = server.hostname || '127.0.0.1';
  const serverPort = server.port || '5432';
  const user = decodeURIComponent(server.username || 'postgres');
  return [
    '[databases]',
    `parley = host=${host} port=${serverPort} dbname=${database} user=${user}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = any',
    'pool_mode = transaction',
    // Fewer server sessions than the store's connections, so transactions move between sessions.
    'default_pool_size = 3',
    'max_client_conn = 200',
    `logfile = ${join(dir, 'pgbouncer.log')}`,
    `pidfile = ${join(dir, 'pgbouncer.pid')}`,
    '',
  ].join('\n');
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  if (!existsSync(PGBOUNCER)) break;
  describe(`parley behind PgBouncer in transaction mode [${dialect}]`, () => {
    const url = new URL(process.env.TEST_DATABASE_URL ?? '');
    const database = `parley_pgb_${randomBytes(5).toString('hex')}`;
    const dir = mkdtempSync(join(tmpdir(), 'parley-pgbouncer-'));
    const admin = new pg.Client({ connectionString: url.toString() });
    let bouncer: ChildProcess | undefined;
    let bouncerUrl = '';

    before(async () => {
      await admin.connect();
      await admin.query(`create database ${database}`);
      const port = await freePort();
      const file = join(dir, 'pgbouncer.ini');
      writeFileSync(file, bouncerConfig(dir, port, url, database));
      // PgBouncer refuses to run as root; `-u` makes it switch to the server's own user.
      chmodSync(dir, 0o777);
      const asUser = process.getuid?.() === 0 ? ['-u', 'postgres'] : [];
      bouncer = spawn(PGBOUNCER, [...asUser, file], { stdio: 'ignore' });
      bouncerUrl = `postgres://${url.username || 'postgres'}@127.0.0.1:${port}/parley`;
      await until(
        async () => {
          const client = new pg.Client({ connectionString: bouncerUrl });
          try {
            await client.connect();
            await client.query('select 1');
            return true;
          } catch {
            return false;
          } finally {
            await client.end().catch(() => undefined);
          }
        },
        10_000,
        `PgBouncer answers (log: ${join(dir, 'pgbouncer.log')})`,
      );
    });

    after(async () => {
      bouncer?.kill('SIGKILL');
      await admin.query(`drop database if exists ${database} with (force)`).catch(() => undefined);
      await admin.end();
      rmSync(dir, { recursive: true, force: true });
    });

    /** The app on the bouncer's database: a store of `poolSize` connections, migrated. */
    async function appBehindBouncer(
      preparedStatements: boolean,
      switches: Error[],
    ): Promise<{ t: TestApp; testStore: TestStore }> {
      const config = { dialect: 'postgres' as const, url: bouncerUrl, preparedStatements };
      const store = await openStore(config, {
        poolSize: 8,
        onSessionSwitch: (error: Error) => switches.push(error),
      });
      await migrateToLatest(store);
      const dataDir = mkdtempSync(join(dir, 'data-'));
      const testStore: TestStore = {
        store,
        database: config,
        schema: undefined,
        dataDir,
        cleanup: () => store.destroy(),
      };
      const t = await createTestApp({
        testStore,
        plan: { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 },
        env: { DATABASE_PREPARED_STATEMENTS: preparedStatements ? 'on' : 'off' },
      });
      return { t, testStore };
    }

    /**
     * Sends `count` texts at once, each retried with its own `Idempotency-Key` while answered 503 (a store fault,
     * docs/decisions/0011-store-faults.md); returns the first answers' statuses and the message ids.
     */
    async function sendAll(
      t: TestApp,
      tag: string,
      count: number,
    ): Promise<{ first: number[]; ids: string[] }> {
      const first: number[] = [];
      const ids = await Promise.all(
        Array.from({ length: count }, async (_, k) => {
          const key = `${tag}-${k}`;
          for (let attempt = 0; ; attempt++) {
            const answer = await t.call(
              'POST',
              '/v1/messages/send',
              { phone: '5511977770001', body: `${tag} ${k}` },
              { 'idempotency-key': key },
            );
            if (attempt === 0) first.push(answer.status);
            if (answer.status === 200) return String(answer.body.data.id);
            assert.equal(answer.status, 503, `send ${key}: ${JSON.stringify(answer.body)}`);
            assert.ok(attempt < 5, `send ${key} still refused after ${attempt + 1} tries`);
          }
        }),
      );
      return { first, ids };
    }

    /** The stored outgoing messages whose text starts with `tag`, by id. */
    async function stored(testStore: TestStore, tag: string): Promise<string[]> {
      const rows = await testStore.store.db
        .selectFrom('messages')
        .select('id')
        .where('from_me', '=', 1)
        .where(sql<string>`content`, 'like', `%${tag} %`)
        .execute();
      return rows.map((row) => row.id).sort();
    }

    it('with the default setting, statements stop being prepared at the first sign and every send is stored once', async () => {
      const switches: Error[] = [];
      const { t, testStore } = await appBehindBouncer(true, switches);
      try {
        await loginSandbox(t);
        const tag = `on-${randomBytes(3).toString('hex')}`;
        const { first, ids } = await sendAll(t, tag, 60);
        assert.equal(new Set(ids).size, 60);
        assert.deepEqual(await stored(testStore, tag), [...ids].sort(), 'each send stored once');
        assert.ok(
          first.filter((status) => status !== 200).length <= 8,
          `at most one refusal a connection: ${first.join(',')}`,
        );
        assert.equal(switches.length, 1, 'the switch is reported once');
        assert.match(String((switches[0] as Error & { code?: string }).code), /^(26000|42P05)$/);

        // From then on nothing fails.
        const later = `later-${randomBytes(3).toString('hex')}`;
        const again = await sendAll(t, later, 60);
        assert.deepEqual(again.first, Array(60).fill(200));
        assert.deepEqual(await stored(testStore, later), [...again.ids].sort());
      } finally {
        await t.close();
        await testStore.cleanup();
      }
    });

    it('with DATABASE_PREPARED_STATEMENTS=off, no send is ever refused', async () => {
      const switches: Error[] = [];
      const { t, testStore } = await appBehindBouncer(false, switches);
      try {
        await loginSandbox(t, '5511999990002');
        const tag = `off-${randomBytes(3).toString('hex')}`;
        const { first, ids } = await sendAll(t, tag, 60);
        assert.deepEqual(first, Array(60).fill(200));
        assert.deepEqual(await stored(testStore, tag), [...ids].sort());
        assert.deepEqual(switches, []);
      } finally {
        await t.close();
        await testStore.cleanup();
      }
    });
  });
}
