import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import pino from 'pino';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { NodeRegistry } from '../../src/nodes/registry.ts';
import { claimLease, getLease, setNodeEndpoint } from '../../src/store/leases.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { fakeSessions, setup } from './lease-support.ts';

/**
 * Which process a node is (docs/decisions/0008-leases-and-fencing.md, "Node identity"), on the real store: nodes
 * that share a host name but not a PID namespace (containers with `--network host`, Kubernetes `hostNetwork`) never
 * find each other gone by their process ids, only by their heartbeats.
 */

const logger = pino({ level: 'silent' });

/** The process spaces of the tests: one machine (a boot id), two PID namespaces. */
const HERE = 'machine-1/pid:[4026531836]';
const OTHER_CONTAINER = 'machine-1/pid:[4026532999]';

/** An instance of a new organization, wanted connected, with no node registered. */
async function oneInstance(testStore: TestStore): Promise<{ db: Kysely<Database>; instanceId: string }> {
  const { db, instances } = await setup(testStore, 1);
  await db.deleteFrom('nodes').execute();
  const instanceId = instances[0]?.id;
  assert.ok(instanceId);
  return { db, instanceId };
}

/** Queues one delivery of a new event of `instanceId`, claimed by `lockedBy`, in `status`; returns the event id. */
async function claimedDelivery(
  db: Kysely<Database>,
  instanceId: string,
  sequence: number,
  lockedBy: string,
  status = 'pending',
): Promise<string> {
  const id = randomUUID();
  const now = Date.now();
  await db
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
  await db
    .insertInto('webhook_deliveries')
    .values({
      event_id: id,
      instance_id: instanceId,
      sequence,
      status,
      attempts: 1,
      max_attempts: 8,
      run_at: 0,
      locked_by: lockedBy,
      locked_at: now,
      last_error: null,
      last_status: null,
      delivered_at: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  return id;
}

async function lockedBy(db: Kysely<Database>, eventId: string): Promise<string | null | undefined> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .select('locked_by')
    .where('event_id', '=', eventId)
    .executeTakeFirst();
  return row?.locked_by;
}

async function nodeRow(db: Kysely<Database>, id: string) {
  return db.selectFrom('nodes').selectAll().where('id', '=', id).executeTakeFirst();
}

async function withStore(dialect: 'sqlite' | 'postgres', run: (testStore: TestStore) => Promise<void>) {
  const testStore = await createTestStore(dialect);
  try {
    await run(testStore);
  } finally {
    await testStore.cleanup();
  }
}

for (const dialect of testDialects()) {
  describe(`nodes sharing a host name, not a PID namespace (${dialect})`, () => {
    for (const [label, other] of [
      ['its pid the same as ours (both pid 1)', { processSpace: OTHER_CONTAINER, pid: process.pid }],
      ['its pid not visible here', { processSpace: OTHER_CONTAINER, pid: 4_000_000 }],
      ['its PID namespace unknown (a row of an older version)', { processSpace: null, pid: 4_000_000 }],
    ] as const) {
      it(`a live node, ${label}, keeps its lease, its claims and its row`, async () => {
        await withStore(dialect, async (testStore) => {
          const { db, instanceId } = await oneInstance(testStore);
          const now = Date.now();
          await upsertNode(db, {
            id: 'node-x',
            host: hostname(),
            startedAt: new Date(now - 60_000).toISOString(),
            heartbeatAt: now,
            ...other,
          });
          await setNodeEndpoint(db, 'node-x', { url: 'http://x.invalid', draining: false });
          const lease = await claimLease(db, {
            instanceId,
            owner: 'node-x',
            previousToken: null,
            expiresAt: now + 8000,
          });
          const claim = await claimedDelivery(db, instanceId, 1, 'node-x');

          // node-y starts here: its registry sweeps at start, then its lease round runs. The process check is the
          // real one: pid 4 000 000 does not exist in this namespace.
          const registry = new NodeRegistry({ db, logger, id: 'node-y', processSpace: HERE });
          await registry.start();
          assert.equal(await registry.sweep(), 0);
          const sessions = fakeSessions();
          const keeper = new LeaseKeeper({ db, nodeId: 'node-y', sessions, logger, heartbeatMs: 60_000 });
          await keeper.start('http://y.invalid');
          await keeper.stop();
          await registry.stop();

          assert.deepEqual(await getLease(db, instanceId), lease, 'the lease is left as node-x renewed it');
          assert.deepEqual(sessions.connected, [], 'node-y opened no session of it');
          assert.equal(await lockedBy(db, claim), 'node-x', 'its webhook claim stays');
          assert.ok(await nodeRow(db, 'node-x'), 'its row stays');
        });
      });
    }
  });
}
