import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { deathOf } from '../../src/nodes/registry.ts';
import type { Database } from '../../src/store/schema.ts';
import { startReceiver } from '../support/https-receiver.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import {
  type Child,
  childEnv,
  deliveredIds,
  deliveryRows,
  gate,
  newSecretKey,
  prepare,
  seed,
  startChild,
  until,
} from './child.ts';

/**
 * Restart without waiting: the claims of a process that is gone are released by the node registry (at boot on
 * the same host, at once), so a restart after kill -9 delivers the backlog within seconds, in `sequence` order,
 * instead of after the stale-claim timeout; a live peer's claims are left alone. Real services in child
 * processes, SIGKILLed; the stale-claim timeout is left at its default (90 s with these settings), so only the
 * registry can make the 5-second bound.
 */

/** The acceptance bound: kill -9, restart, and the backlog is delivered within this, ms. */
const RESTART_BOUND_MS = 5000;

/**
 * Child environment with the default stale-claim timeout (no CHILD_STALE_MS) and a 30-second attempt timeout, so
 * a held request stays in flight for the whole test (stale after 2 × 30 s + 30 s = 90 s).
 */
function envWithDefaultStale(testStore: TestStore, extra: Record<string, string> = {}) {
  const { CHILD_STALE_MS: _stale, ...env } = childEnv(testStore, newSecretKey());
  return { ...env, WEBHOOK_TIMEOUT_SECONDS: '30', ...extra };
}

async function nodeIds(db: Kysely<Database>) {
  return (await db.selectFrom('nodes').select('id').orderBy('id').execute()).map((row) => row.id);
}

/** Sequences of the requests the receiver got, in arrival order, from index `from` on. */
function sequencesFrom(requests: readonly { body: Buffer }[], from: number): number[] {
  return requests.slice(from).map((request) => JSON.parse(request.body.toString()).sequence);
}

async function withStore(dialect: 'sqlite' | 'postgres', run: (store: TestStore) => Promise<void>) {
  const testStore = await createTestStore(dialect);
  try {
    await run(testStore);
  } finally {
    await testStore.cleanup();
  }
}

describe('which registered nodes are dead (node registry)', () => {
  const self = {
    processSpace: 'boot-1/pid:[1]',
    pid: 4242,
    now: 100_000,
    deadAfterMs: 15_000,
    processAlive: (pid: number) => pid === 7,
  };
  const node = (fields: Partial<Parameters<typeof deathOf>[0]>) => ({
    id: 'n',
    host: 'here',
    pid: 7,
    startedAt: '2026-01-01T00:00:00.000Z',
    heartbeatAt: 99_000,
    processSpace: 'boot-1/pid:[1]',
    ...fields,
  });

  it('a live peer in this process space or another is alive; a lapsed heartbeat or a gone process is dead', () => {
    assert.equal(deathOf(node({}), self), null, 'running process in this process space, fresh heartbeat');
    assert.equal(
      deathOf(node({ processSpace: 'boot-2/pid:[1]', pid: 8 }), self),
      null,
      'another process space: only the heartbeat counts',
    );
    assert.equal(
      deathOf(node({ processSpace: 'boot-2/pid:[1]', heartbeatAt: 84_999 }), self),
      'heartbeat expired',
    );
    assert.equal(
      deathOf(node({ processSpace: 'boot-2/pid:[1]', heartbeatAt: 85_000 }), self),
      null,
      'at the bound',
    );
    assert.equal(deathOf(node({ pid: 8 }), self), 'process gone', 'its process no longer exists');
    assert.equal(
      deathOf(node({ pid: 4242 }), self),
      'process gone',
      'our own process id in our process space, not registered by us: a restarted process',
    );
  });

  it('never finds a node of another or an unknown PID namespace gone by its process', () => {
    // Containers sharing the host's name (--network host, hostNetwork): the same boot id, each its own namespace.
    const sibling = { processSpace: 'boot-1/pid:[2]' };
    assert.equal(deathOf(node({ ...sibling, pid: 4242 }), self), null, 'its pid 1 is not ours');
    assert.equal(deathOf(node({ ...sibling, pid: 8 }), self), null, 'its pid cannot be seen from here');
    assert.equal(deathOf(node({ processSpace: null, pid: 8 }), self), null, 'a row of an older version');
    assert.equal(deathOf(node({ processSpace: undefined, pid: 4242 }), self), null);
    assert.equal(
      deathOf(node({ pid: 8 }), { ...self, processSpace: null }),
      null,
      'this process space unknown',
    );
    assert.equal(deathOf(node({ ...sibling, heartbeatAt: 84_999 }), self), 'heartbeat expired');
  });
});

for (const dialect of testDialects()) {
  describe(`claims of dead nodes are released at once (${dialect})`, () => {
    it(`kill -9 then restart delivers the backlog within ${RESTART_BOUND_MS / 1000} s, in order`, async () => {
      await withStore(dialect, async (testStore) => {
        const db = testStore.store.db;
        const env = envWithDefaultStale(testStore);
        const {
          instances: [instance],
          key,
        } = await seed(testStore, 1);
        assert.ok(instance);
        const replies = gate();
        const receiver = await startReceiver({ respond: replies.respond });
        const children: Child[] = [];
        try {
          const first = await startChild(env, 'restart-1');
          children.push(first);
          await prepare(first, key, instance.id, receiver.url, '5511999990001');
          await first.inbound(key, instance.id, 10, 'm');
          await receiver.waitForCount(1, 10_000);
          const before = await deliveryRows(db);
          assert.equal(before.length, 11);
          // The first event sent is in flight, held by the receiver (1 and 2: SessionStatus, not subscribed). Its
          // claim may have taken the lane's next deliveries with it (a lane batch, when the events were recorded
          // before it): those are held by the same node, not started.
          const held = before
            .filter((row) => row.locked_by !== null)
            .map((row) => [Number(row.sequence), row.locked_by]);
          assert.deepEqual(held[0], [3, 'restart-1'], JSON.stringify(held));
          assert.ok(
            held.every(([sequence, node], i) => sequence === 3 + i && node === 'restart-1'),
            JSON.stringify(held),
          );
          assert.deepEqual(sequencesFrom(receiver.requests, 0), [3], 'one request in flight');
          await first.kill();
          await receiver.waitFor((requests) => requests[0]?.reply.state === 'aborted', 10_000);
          replies.openAll();

          const second = await startChild(env, 'restart-2');
          children.push(second);
          await until(
            async () => {
              const got = deliveredIds(receiver.requests);
              const rows = await deliveryRows(db);
              return rows.every((row) => row.status === 'delivered' && (got.get(row.event_id) ?? 0) >= 1);
            },
            RESTART_BOUND_MS,
            'after the restart every queued event was delivered',
          );
          assert.deepEqual(
            sequencesFrom(receiver.requests, 1),
            Array.from({ length: 11 }, (_, i) => i + 3),
            'after the restart the events were sent once each, in sequence order',
          );
          assert.deepEqual(await nodeIds(db), ['restart-2'], 'the dead node was forgotten');
          const abandoned = await db
            .selectFrom('webhook_attempts')
            .select('worker')
            .where('error', 'like', 'abandoned:%')
            .execute();
          assert.deepEqual(
            abandoned.map((a) => a.worker),
            ['restart-1'],
          );
          assert.equal(await second.terminate(), 0);
          assert.deepEqual(await nodeIds(db), [], 'a graceful stop removes the node');
        } finally {
          for (const child of children) await child.kill();
          await receiver.close();
        }
      });
    });

    it(`kill -9 then restart under the same node id (NODE_ID) delivers the backlog within ${
      RESTART_BOUND_MS / 1000
    } s`, async () => {
      // The dead process's claims are locked by the new process's own id: its start takes the row over and releases
      // them (docs/decisions/0008-leases-and-fencing.md, "Node identity"), where a sweep of other nodes would not.
      await withStore(dialect, async (testStore) => {
        const db = testStore.store.db;
        const env = envWithDefaultStale(testStore);
        const {
          instances: [instance],
          key,
        } = await seed(testStore, 1);
        assert.ok(instance);
        const replies = gate();
        const receiver = await startReceiver({ respond: replies.respond });
        const children: Child[] = [];
        try {
          const first = await startChild(env, 'node-a');
          children.push(first);
          await prepare(first, key, instance.id, receiver.url, '5511999990001');
          await first.inbound(key, instance.id, 5, 'm');
          await receiver.waitForCount(1, 10_000);
          assert.ok(
            (await deliveryRows(db)).some((row) => row.locked_by === 'node-a'),
            'a claim in flight',
          );
          await first.kill();
          replies.openAll();

          const second = await startChild(env, 'node-a');
          children.push(second);
          await until(
            async () => {
              const got = deliveredIds(receiver.requests);
              const rows = await deliveryRows(db);
              return rows.every((row) => row.status === 'delivered' && (got.get(row.event_id) ?? 0) >= 1);
            },
            RESTART_BOUND_MS,
            'after the restart every queued event was delivered',
          );
          assert.deepEqual(await nodeIds(db), ['node-a']);
          assert.equal(await second.terminate(), 0);
          assert.deepEqual(await nodeIds(db), [], 'a graceful stop removes the node');
        } finally {
          for (const child of children) await child.kill();
          await receiver.close();
        }
      });
    });

    it("leaves a live peer's claims alone, and releases them as soon as that peer is killed", async () => {
      await withStore(dialect, async (testStore) => {
        const db = testStore.store.db;
        const env = envWithDefaultStale(testStore, { CHILD_HEARTBEAT_MS: '100' });
        const {
          instances: [instance],
          key,
        } = await seed(testStore, 1);
        assert.ok(instance);
        const replies = gate();
        const receiver = await startReceiver({ respond: replies.respond });
        const children: Child[] = [];
        try {
          const a = await startChild(env, 'peer-a');
          children.push(a);
          await prepare(a, key, instance.id, receiver.url, '5511999990001');
          await a.inbound(key, instance.id, 3, 'p');
          await receiver.waitForCount(1, 10_000);

          const b = await startChild(env, 'peer-b');
          children.push(b);
          // b has registered and swept at boot; wait for three more of its heartbeats (each followed by a sweep).
          const beat = async () =>
            Number(
              (
                await db
                  .selectFrom('nodes')
                  .select('heartbeat_at')
                  .where('id', '=', 'peer-b')
                  .executeTakeFirst()
              )?.heartbeat_at ?? 0,
            );
          const seen = new Set<number>([await beat()]);
          await until(
            async () => {
              seen.add(await beat());
              return seen.size >= 4;
            },
            10_000,
            'peer-b heartbeats',
          );
          assert.deepEqual(await nodeIds(db), ['peer-a', 'peer-b'], 'both nodes registered');
          const held = (await deliveryRows(db)).filter((row) => row.locked_by !== null);
          assert.deepEqual(
            held.map((row) => [Number(row.sequence), row.locked_by]),
            [[3, 'peer-a']],
            "peer-b left the live peer's claim alone",
          );
          assert.equal(receiver.requests.length, 1, 'and sent nothing of that instance meanwhile');

          await a.kill();
          replies.openAll();
          await until(
            async () => (await deliveryRows(db)).every((row) => row.status === 'delivered'),
            RESTART_BOUND_MS,
            'peer-b took over once peer-a was gone',
          );
          assert.deepEqual(sequencesFrom(receiver.requests, 1), [3, 4, 5, 6]);
          const delivered = await db
            .selectFrom('webhook_attempts')
            .select('worker')
            .where('status_code', '=', 200)
            .distinct()
            .execute();
          assert.deepEqual(
            delivered.map((row) => row.worker),
            ['peer-b'],
          );
          assert.deepEqual(await nodeIds(db), ['peer-b']);
        } finally {
          for (const child of children) await child.kill();
          await receiver.close();
        }
      });
    });
  });
}
