import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import pino from 'pino';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { NodeRegistry } from '../../src/nodes/registry.ts';
import type { Store } from '../../src/store/database.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import { createTestStore, testDialects } from '../support/store.ts';

/**
 * The node registry's sweep on the store (SQLite and PostgreSQL): it releases the claims of nodes whose heartbeat
 * lapsed (any host) and forgets them, leaves fresh nodes' claims and finished rows alone, and removes its own row
 * at a graceful stop. The process-gone rule is exercised with real processes in dead-nodes.test.ts.
 */

const logger = pino({ level: 'silent' });

/** Queues one delivery of a new event on `instanceId`, claimed by `lockedBy` (or unclaimed), in `status`. */
async function delivery(
  store: Store,
  instanceId: string,
  sequence: number,
  lockedBy: string | null,
  status = 'pending',
) {
  const id = randomUUID();
  const now = Date.now();
  await store.db
    .insertInto('webhook_events')
    .values({
      id,
      instance_id: instanceId,
      sequence,
      type: 'Message',
      payload: '{}',
      skip_reason: null,
      created_at: now,
    })
    .execute();
  await store.db
    .insertInto('webhook_deliveries')
    .values({
      event_id: id,
      instance_id: instanceId,
      sequence,
      status,
      attempts: 0,
      max_attempts: 8,
      run_at: 0,
      locked_by: lockedBy,
      locked_at: lockedBy === null ? null : Date.now(),
      last_error: null,
      last_status: null,
      delivered_at: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  return id;
}

for (const dialect of testDialects()) {
  describe(`node registry sweep (${dialect})`, () => {
    it("releases a lapsed node's claims, keeps a fresh node's, and removes its own row at stop", async () => {
      const testStore = await createTestStore(dialect);
      const { store } = testStore;
      try {
        // Three or more test instances: the pro plan (free allows 2, docs/decisions/0029-instances-over-the-api.md).
        const org = await adminCreateOrg(store.db, { name: 'registry', plan: 'pro' });
        const instances = await Promise.all(
          ['a', 'b', 'c'].map((name) => adminCreateInstance(store.db, { org: org.id, env: 'test', name })),
        );
        const [one, two, three] = instances.map((i) => i.id);
        assert.ok(one && two && three);
        const now = Date.now();
        const base = { pid: 1, startedAt: new Date(now - 60_000).toISOString() };
        await upsertNode(store.db, { id: 'lapsed', host: 'elsewhere', heartbeatAt: now - 20_000, ...base });
        await upsertNode(store.db, { id: 'fresh', host: 'elsewhere', heartbeatAt: now - 1_000, ...base });
        const lapsedClaim = await delivery(store, one, 1, 'lapsed');
        const lapsedDone = await delivery(store, one, 2, 'lapsed', 'delivered');
        const freshClaim = await delivery(store, two, 1, 'fresh');
        const unclaimed = await delivery(store, three, 1, null);

        let woken = 0;
        const registry = new NodeRegistry({
          db: store.db,
          logger,
          id: 'me',
          onReleased: (claims) => {
            woken += claims;
          },
        });
        await registry.start();
        const rows = await store.db
          .selectFrom('webhook_deliveries')
          .select(['event_id', 'locked_by', 'locked_at', 'status'])
          .execute();
        const byId = new Map(rows.map((row) => [row.event_id, row]));
        assert.deepEqual(
          { ...byId.get(lapsedClaim) },
          { event_id: lapsedClaim, locked_by: null, locked_at: null, status: 'pending' },
          'the lapsed node claim is released',
        );
        assert.equal(byId.get(lapsedDone)?.locked_by, 'lapsed', 'a finished row is not touched');
        assert.equal(byId.get(freshClaim)?.locked_by, 'fresh', "a live node's claim stays");
        assert.equal(byId.get(unclaimed)?.locked_by, null);
        assert.equal(woken, 1, 'the worker is woken with the released count');
        const nodes = await store.db
          .selectFrom('nodes')
          .select(['id', 'host', 'pid'])
          .orderBy('id')
          .execute();
        assert.deepEqual(
          nodes.map((n) => n.id),
          ['fresh', 'me'],
        );
        assert.equal(await registry.sweep(), 0, 'nothing more to release');

        await registry.stop();
        assert.deepEqual(
          (await store.db.selectFrom('nodes').select('id').execute()).map((n) => n.id),
          ['fresh'],
          'a graceful stop removes the node',
        );
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
