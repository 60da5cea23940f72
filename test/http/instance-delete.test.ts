import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { Store } from '../../src/store/database.ts';
import { type ApiResponse, createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * `DELETE /v1/instances/{id}` (docs/api.md#instances, docs/decisions/0029-instances-over-the-api.md): the linked
 * session is logged out first, then every row of the instance in every table that has an `instance_id` (read from
 * the store's own catalogue, so a table added later is covered) and its media files are removed, while another
 * instance keeps all of its own.
 */

const NOT_FOUND = { error: { code: 404, message: 'instance not found' } };
const ANA = '5511988887777';

/** The tables with an `instance_id` column, read from the store's own catalogue. */
async function instanceTables(store: Store): Promise<string[]> {
  const { rows } =
    store.dialect === 'sqlite'
      ? await sql<{
          name: string;
        }>`select m.name as name from sqlite_master m join pragma_table_info(m.name) p
          where m.type = 'table' and p.name = 'instance_id' order by m.name`.execute(store.db)
      : await sql<{ name: string }>`select table_name as name from information_schema.columns
          where column_name = 'instance_id' and table_schema = current_schema() order by table_name`.execute(
          store.db,
        );
  return rows.map((row) => row.name);
}

/** Rows of instance `id` in each of `tables`. */
async function rowsOf(store: Store, tables: string[], id: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of tables) {
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table)}
      where instance_id = ${id}`.execute(store.db);
    out[table] = Number(rows[0]?.n ?? 0);
  }
  return out;
}

/** Webhook attempts of the events of instance `id` (the one table keyed by event, not instance). */
async function attemptsOf(store: Store, id: string): Promise<number> {
  const row = await store.db
    .selectFrom('webhook_attempts')
    .innerJoin('webhook_events', 'webhook_events.id', 'webhook_attempts.event_id')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('webhook_events.instance_id', '=', id)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Rows the API flows of the test do not make (a webhook delivery needs a reachable HTTPS receiver, a socket lock a
 * live session, a lease several nodes, a replay a signed gateway request): written as those parts write them.
 */
async function seedUnreachedRows(store: Store, instanceId: string, now: number): Promise<void> {
  const db = store.db;
  const event = await db
    .selectFrom('webhook_events')
    .select(['id', 'sequence'])
    .where('instance_id', '=', instanceId)
    .orderBy('sequence')
    .executeTakeFirstOrThrow();
  await db
    .insertInto('webhook_deliveries')
    .values({
      event_id: event.id,
      instance_id: instanceId,
      sequence: event.sequence,
      status: 'failed',
      attempts: 1,
      max_attempts: 1,
      run_at: now,
      locked_by: null,
      locked_at: null,
      last_error: 'connection refused',
      last_status: null,
      delivered_at: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  await db
    .insertInto('webhook_attempts')
    .values({
      id: crypto.randomUUID(),
      event_id: event.id,
      number: 1,
      url: 'https://hooks.example.com/parley',
      worker: 'w1',
      attempted_at: now,
      finished_at: now,
      status_code: null,
      duration_ms: 3,
      error: 'connection refused',
      response_body: null,
      response_truncated: 0,
    })
    .execute();
  await db
    .insertInto('instance_locks')
    .values({ instance_id: instanceId, owner: 'p1', acquired_at: now, expires_at: now + 30_000 })
    .execute();
  await db
    .insertInto('instance_leases')
    .values({ instance_id: instanceId, owner: 'n1', token: 1, expires_at: now + 8000 })
    .execute();
  await db
    .insertInto('gateway_replay')
    .values({ instance_id: instanceId, signature: 'ab'.repeat(32), expires_at: now + 301_000 })
    .execute();
  await db
    .insertInto('webhook_endpoints')
    .values({
      id: crypto.randomUUID(),
      instance_id: instanceId,
      url: 'https://hooks.example.com/orders',
      events: '["Message"]',
      description: null,
      secret: 'sealed',
      enabled: 1,
      disabled_at: null,
      disabled_reason: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  await db
    .insertInto('lid_mappings')
    .values({ instance_id: instanceId, lid: '123456789012345', phone: '5511988887777', updated_at: now })
    .onConflict((oc) => oc.columns(['instance_id', 'lid']).doNothing())
    .execute();
  // A receipt held for a send (docs/decisions/0104-receipts-before-their-send.md): it goes with its job.
  const job = await db
    .selectFrom('send_jobs')
    .select('id')
    .where('instance_id', '=', instanceId)
    .executeTakeFirstOrThrow();
  await db
    .insertInto('held_receipts')
    .values({
      instance_id: instanceId,
      message_id: job.id,
      state: 'read',
      sender: '5511988887777@s.whatsapp.net',
      receipt: '{}',
      held_at: now,
    })
    .onConflict((oc) => oc.columns(['instance_id', 'message_id', 'state', 'sender']).doNothing())
    .execute();
  await db
    .insertInto('labels')
    .values({
      instance_id: instanceId,
      label_id: '1',
      name: 'New customer',
      color: 0,
      predefined_id: '1',
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['instance_id', 'label_id']).doNothing())
    .execute();
  await db
    .insertInto('chat_labels')
    .values({ instance_id: instanceId, chat: '5511988887777@s.whatsapp.net', label_id: '1', updated_at: now })
    .onConflict((oc) => oc.columns(['instance_id', 'chat', 'label_id']).doNothing())
    .execute();
  await db
    .insertInto('recorded_updates')
    .values({ instance_id: instanceId, id: '3EB0UPDATE', created_at: now })
    .onConflict((oc) => oc.columns(['instance_id', 'id']).doNothing())
    .execute();
}

for (const dialect of testDialects()) {
  describe(`deleting an instance removes every row of it [${dialect}]`, () => {
    let t: TestApp;
    const as = (key: string) => ({ authorization: `Bearer ${key}` });
    const call = (method: 'GET' | 'DELETE', url: string, body: unknown, key: string) =>
      t.call(method, url, body, as(key));

    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    /** A new organization on the pro plan (room for several instances) with an `instances:manage` test key. */
    async function proOrganization() {
      const name = `org-${Math.random().toString(36).slice(2, 10)}`;
      const org = await adminCreateOrg(t.testStore.store.db, { name, plan: 'pro' });
      return { org, key: await t.newKey({ org: org.id, scopes: ['instances:manage'] }) };
    }

    /** Notes the instances the session manager logs out until `restore()`. */
    function spyLogouts(): { logouts: string[]; restore: () => void } {
      const logouts: string[] = [];
      const sessions = t.services.sessions;
      const logout = sessions.logout.bind(sessions);
      sessions.logout = async (instance) => {
        logouts.push(instance.id);
        return logout(instance);
      };
      return { logouts, restore: () => (sessions.logout = logout) };
    }

    it('DELETE logs the session out, then removes the instance and every row of it; other instances keep theirs', async () => {
      const { store } = t.testStore;
      const { org, key } = await proOrganization();
      const chat = await t.newKey({ org: org.id });
      const db = store.db;
      const victim = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'victim' });
      const keeper = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'keeper' });
      const api = (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown): Promise<ApiResponse> =>
        t.call(method, url, body, as(chat));
      for (const [instance, phone] of [
        [victim, '5511999990031'],
        [keeper, '5511999990032'],
      ] as const) {
        const from = `from=${instance.id}`;
        assert.equal((await api('POST', `/v1/session/connect?${from}`, {})).status, 200);
        assert.equal((await api('POST', `/v1/sandbox/scan?${from}`, { phone })).status, 200);
        assert.equal(
          (await api('POST', `/v1/sandbox/inbound?${from}`, { phone: ANA, body: 'hi' })).status,
          200,
        );
        assert.equal(
          (await api('POST', '/v1/messages/send', { from: instance.id, phone: ANA, body: 'hello' })).status,
          200,
        );
        assert.equal((await api('PUT', `/v1/session/pacing?${from}`, { minIntervalMs: 10 })).status, 200);
        assert.equal((await api('POST', `/v1/calls/settings?${from}`, { autoReject: true })).status, 200);
        await seedUnreachedRows(store, instance.id, t.clock());
      }
      const media = t.config.media.dir;
      for (const instance of [victim, keeper]) {
        mkdirSync(join(media, instance.id), { recursive: true });
        writeFileSync(join(media, instance.id, 'file'), 'bytes');
      }
      const tables = await instanceTables(store);
      assert.ok(tables.length >= 12, `tables with instance_id: ${tables.join(', ')}`);
      const before = await rowsOf(store, tables, victim.id);
      const empty = Object.entries(before).filter(([, n]) => n === 0);
      assert.deepEqual(
        empty,
        [],
        'every table with instance_id holds rows of the instance before the delete',
      );
      assert.ok((await attemptsOf(store, victim.id)) > 0);
      const keeperBefore = await rowsOf(store, tables, keeper.id);
      const keeperAttempts = await attemptsOf(store, keeper.id);

      const { logouts, restore } = spyLogouts();
      try {
        const deleted = await call('DELETE', `/v1/instances/${victim.id}`, undefined, key);
        assert.deepEqual(deleted.body, {
          success: true,
          code: 200,
          data: { details: 'Instance deleted', id: victim.id },
        });
      } finally {
        restore();
      }
      assert.deepEqual(logouts, [victim.id], 'the linked session was logged out first');
      assert.equal(
        t.services.sessions.existing(victim.id),
        undefined,
        'no session of the instance is left in this process',
      );
      assert.equal(
        await db.selectFrom('instances').select('id').where('id', '=', victim.id).executeTakeFirst(),
        undefined,
      );
      assert.deepEqual(await rowsOf(store, tables, victim.id), Object.fromEntries(tables.map((n) => [n, 0])));
      assert.equal(await attemptsOf(store, victim.id), 0);
      assert.equal(existsSync(join(media, victim.id)), false, "the instance's media files are removed");
      assert.deepEqual(
        await rowsOf(store, tables, keeper.id),
        keeperBefore,
        'the other instance keeps its rows',
      );
      assert.equal(await attemptsOf(store, keeper.id), keeperAttempts);
      assert.equal(existsSync(join(media, keeper.id, 'file')), true);

      assert.deepEqual((await call('GET', `/v1/instances/${victim.id}`, undefined, key)).body, NOT_FOUND);
      assert.deepEqual((await call('DELETE', `/v1/instances/${victim.id}`, undefined, key)).body, NOT_FOUND);
      assert.deepEqual((await api('GET', `/v1/session/status?from=${victim.id}`)).body, NOT_FOUND);
      // The other instance works on, at its pace (10 ms from its last send).
      assert.deepEqual((await api('GET', `/v1/session/status?from=${keeper.id}`)).body.data.loggedIn, true);
      t.clock.advance(10);
      assert.equal(
        (await api('POST', '/v1/messages/send', { from: keeper.id, phone: ANA, body: 'still here' })).status,
        200,
      );
    });

    it('DELETE of an instance that never connected logs nothing out', async () => {
      const { org, key } = await proOrganization();
      const idle = await adminCreateInstance(t.testStore.store.db, {
        org: org.id,
        env: 'test',
        name: 'idle',
      });
      const { logouts, restore } = spyLogouts();
      try {
        assert.equal((await call('DELETE', `/v1/instances/${idle.id}`, undefined, key)).status, 200);
      } finally {
        restore();
      }
      assert.deepEqual(logouts, []);
    });
  });
}
