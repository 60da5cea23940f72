import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import pino from 'pino';
import { ConfigError } from '../../src/config/config.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { NodeRegistry } from '../../src/nodes/registry.ts';
import { claimLease, getLease, setNodeEndpoint } from '../../src/store/leases.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import type { Database } from '../../src/store/schema.ts';
import { stopServing } from '../../src/wiring/nodes.ts';
import { createTestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { sessionsWithContexts } from '../support/fake-engine.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { fakeSessions, setup } from './lease-support.ts';

/**
 * Which process a node is (docs/decisions/0008-leases-and-fencing.md, "Node identity"), on the real store:
 * - nodes that share a host name but not a PID namespace (containers with `--network host`, Kubernetes
 *   `hostNetwork`) never find each other gone by their process ids, only by their heartbeats;
 * - a restart under the same id (`NODE_ID`) takes its dead predecessor's row over and releases its webhook claims
 *   and leases at once, as for any dead node;
 * - a start under the id of a live node is refused, naming it; a running node whose id another process took over
 *   stops serving (its sessions closed, none made any more), without exiting.
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

/** A start refused because a live process uses the id, its message naming that process. */
function refusal(pattern: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof ConfigError, `a ConfigError (one line at start): ${String(error)}`);
    assert.match(error.message, pattern);
    return true;
  };
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

  describe(`a restart under the same node id (${dialect})`, () => {
    for (const [label, predecessor, processAlive] of [
      [
        'its predecessor in this PID namespace, the process gone (kill -9, then a restart at once)',
        { processSpace: HERE, pid: 999_999, heartbeatAt: Date.now() },
        () => false,
      ],
      [
        'its predecessor in another PID namespace, the heartbeat expired (a restarted container)',
        { processSpace: OTHER_CONTAINER, pid: 1, heartbeatAt: Date.now() - 20_000 },
        () => true,
      ],
    ] as const) {
      it(`takes the row over and releases what the dead process held, at once: ${label}`, async () => {
        await withStore(dialect, async (testStore) => {
          const { db, instanceId } = await oneInstance(testStore);
          const now = Date.now();
          await upsertNode(db, {
            id: 'node-a',
            host: hostname(),
            startedAt: new Date(now - 60_000).toISOString(),
            incarnation: 'previous-process',
            ...predecessor,
            heartbeatAt: Math.min(predecessor.heartbeatAt, now),
          });
          await setNodeEndpoint(db, 'node-a', { url: 'http://old.invalid', draining: true });
          await claimLease(db, { instanceId, owner: 'node-a', previousToken: null, expiresAt: now + 60_000 });
          const claim = await claimedDelivery(db, instanceId, 1, 'node-a');
          const done = await claimedDelivery(db, instanceId, 2, 'node-a', 'delivered');

          let woken = 0;
          const registry = new NodeRegistry({
            db,
            logger,
            id: 'node-a',
            processSpace: HERE,
            processAlive,
            onReleased: (claims) => {
              woken += claims;
            },
          });
          const started = Date.now();
          await registry.start();
          try {
            assert.ok(Date.now() - started < 2000, 'no wait for a stale-claim timeout');
            assert.equal(await lockedBy(db, claim), null, "the dead process's claim is released");
            assert.equal(await lockedBy(db, done), 'node-a', 'a finished delivery is not touched');
            assert.equal(woken, 1, 'the worker is woken');
            const lease = await getLease(db, instanceId);
            assert.ok((lease?.expiresAt ?? Infinity) <= Date.now(), "the dead process's lease expired");
            const row = await nodeRow(db, 'node-a');
            assert.deepEqual(
              [row?.incarnation, Number(row?.pid), row?.process_space, row?.url, Number(row?.draining)],
              [registry.incarnation, process.pid, HERE, null, 0],
              'the row is the new process',
            );
            assert.equal(registry.registered, true);
          } finally {
            await registry.stop();
          }
          assert.equal(await nodeRow(db, 'node-a'), undefined, 'a graceful stop removes its own row');
        });
      });
    }
  });

  describe(`a second process under the id of a live node (${dialect})`, () => {
    it('in this PID namespace: refused at once, naming it; the live node keeps its row', async () => {
      await withStore(dialect, async (testStore) => {
        const { db } = await oneInstance(testStore);
        const first = new NodeRegistry({ db, logger, id: 'node-a', processSpace: HERE, heartbeatMs: 50 });
        await first.start();
        const second = new NodeRegistry({ db, logger, id: 'node-a', processSpace: HERE, heartbeatMs: 50 });
        try {
          const started = Date.now();
          await assert.rejects(
            second.start(),
            refusal(
              new RegExp(
                `^NODE_ID node-a is in use by ${hostname()} pid ${process.pid} \\(heartbeat \\d+ s ago\\): give ` +
                  'every node its own NODE_ID',
              ),
            ),
          );
          assert.ok(Date.now() - started < 2000, 'refused without waiting');
          // What a failed start does: stop what it started.
          await second.stop();
          assert.equal((await nodeRow(db, 'node-a'))?.incarnation, first.incarnation, "the first node's row");
          const beat = Number((await nodeRow(db, 'node-a'))?.heartbeat_at);
          await eventually('a heartbeat of the first node', async () => {
            return Number((await nodeRow(db, 'node-a'))?.heartbeat_at) > beat;
          });
          assert.equal(first.registered, true);
          assert.equal(first.displaced, undefined);
        } finally {
          await first.stop();
        }
      });
    });

    it('under another host name: refused at once, naming its host, process and heartbeat', async () => {
      await withStore(dialect, async (testStore) => {
        const { db } = await oneInstance(testStore);
        await upsertNode(db, {
          id: 'node-a',
          host: 'host-1',
          pid: 4321,
          startedAt: new Date(Date.now() - 60_000).toISOString(),
          heartbeatAt: Date.now() - 2000,
          processSpace: 'machine-2/pid:[4026531836]',
          incarnation: 'host-1-process',
        });
        const second = new NodeRegistry({ db, logger, id: 'node-a', processSpace: HERE, deadAfterMs: 8000 });
        await assert.rejects(
          second.start(),
          refusal(
            new RegExp(
              '^NODE_ID node-a is in use by host-1 pid 4321 \\(heartbeat 2 s ago\\): give every node its own ' +
                'NODE_ID; if that process is gone, start again once its heartbeat is older than 8 s$',
            ),
          ),
        );
        await second.stop();
        assert.equal((await nodeRow(db, 'node-a'))?.incarnation, 'host-1-process', 'its row is left alone');
      });
    });

    it('under this host name in another PID namespace: waits, refused as soon as it renews its heartbeat', async () => {
      await withStore(dialect, async (testStore) => {
        const { db } = await oneInstance(testStore);
        const first = new NodeRegistry({
          db,
          logger,
          id: 'node-a',
          processSpace: OTHER_CONTAINER,
          heartbeatMs: 100,
        });
        await first.start();
        // Its pid cannot be told from ours here: the second cannot know whether it runs, until it heartbeats.
        const second = new NodeRegistry({
          db,
          logger,
          id: 'node-a',
          processSpace: HERE,
          heartbeatMs: 100,
          deadAfterMs: 5000,
        });
        try {
          const started = Date.now();
          await assert.rejects(second.start(), refusal(/^NODE_ID node-a is in use by /));
          assert.ok(
            Date.now() - started < 2500,
            `refused within a heartbeat or two, not ${Date.now() - started} ms`,
          );
          await second.stop();
          assert.equal((await nodeRow(db, 'node-a'))?.incarnation, first.incarnation);
        } finally {
          await first.stop();
        }
      });
    });

    it('under this host name in another PID namespace: taken over once its heartbeat expired', async () => {
      await withStore(dialect, async (testStore) => {
        const { db, instanceId } = await oneInstance(testStore);
        // A container killed a moment ago: its row fresh, never renewed again.
        await upsertNode(db, {
          id: 'node-a',
          host: hostname(),
          pid: 1,
          startedAt: new Date(Date.now() - 60_000).toISOString(),
          heartbeatAt: Date.now(),
          processSpace: OTHER_CONTAINER,
          incarnation: 'killed-container',
        });
        const claim = await claimedDelivery(db, instanceId, 1, 'node-a');
        const registry = new NodeRegistry({
          db,
          logger,
          id: 'node-a',
          processSpace: HERE,
          heartbeatMs: 100,
          deadAfterMs: 600,
        });
        const started = Date.now();
        await registry.start();
        try {
          const waited = Date.now() - started;
          assert.ok(waited >= 400 && waited < 3000, `waited out its heartbeat: ${waited} ms`);
          assert.equal((await nodeRow(db, 'node-a'))?.incarnation, registry.incarnation);
          assert.equal(await lockedBy(db, claim), null);
        } finally {
          await registry.stop();
        }
      });
    });
  });

  describe(`a running node whose id another process took over (${dialect})`, () => {
    it('stops heartbeating, says so once, reports itself not registered and leaves that row', async () => {
      await withStore(dialect, async (testStore) => {
        const { db } = await oneInstance(testStore);
        const reasons: string[] = [];
        const registry = new NodeRegistry({
          db,
          logger,
          id: 'node-a',
          processSpace: HERE,
          heartbeatMs: 50,
          onDisplaced: (reason) => reasons.push(reason),
        });
        await registry.start();
        try {
          // The other process (the same NODE_ID started on host-2 after this one's heartbeat looked lapsed).
          const at = Date.now();
          await db
            .updateTable('nodes')
            .set({ host: 'host-2', pid: 77, incarnation: 'intruder', heartbeat_at: at })
            .where('id', '=', 'node-a')
            .execute();
          await eventually('the node displaced', () => reasons.length > 0);
          assert.match(
            reasons[0] ?? '',
            /^NODE_ID node-a was taken over by host-2 pid 77: this node stops serving/,
          );
          assert.equal(registry.displaced, reasons[0]);
          assert.equal(registry.registered, false, '/readyz turns 503');
          await delay(200);
          assert.equal(reasons.length, 1, 'said once');
          const row = await nodeRow(db, 'node-a');
          assert.deepEqual(
            [row?.incarnation, Number(row?.heartbeat_at)],
            ['intruder', at],
            'its row untouched',
          );
        } finally {
          await registry.stop();
        }
        assert.equal((await nodeRow(db, 'node-a'))?.incarnation, 'intruder', 'its stop leaves the row');
      });
    });
  });
}

describe('a node that stops serving (another process took its id over)', () => {
  it('closes every session at once, makes none any more, and stops renewing its leases', async () => {
    await withStore('sqlite', async (testStore) => {
      const { db, instances } = await setup(testStore, 2);
      const [one, two] = instances;
      assert.ok(one && two);
      const { sessions } = sessionsWithContexts(db, {});
      await sessions.session(one);
      assert.deepEqual(sessions.ids(), [one.id]);
      let keeperStopped = false;
      await stopServing({
        sessions,
        keeper: {
          stop: async () => {
            keeperStopped = true;
          },
        },
        logger,
      });
      assert.deepEqual(sessions.ids(), [], 'its session closed');
      assert.equal(keeperStopped, true, 'no lease renewed or claimed any more');
      for (const instance of [one, two])
        await assert.rejects(sessions.session(instance), (error: unknown) => {
          assert.ok(error instanceof DomainError);
          assert.equal(error.code, 'not_ready');
          assert.match(error.message, /another process took its NODE_ID over/);
          return true;
        });
      await assert.rejects(sessions.restore(two.id), { code: 'not_ready' });
    });
  });

  it('as wired in the services: its row taken over, its sessions stop and readiness turns 503', async () => {
    const test = await createTestApp({
      env: { CLUSTER_SECRET: 'test-cluster-secret-0123456789abcdef', NODE_ID: 'node-a' },
      webhookWorker: { start: false },
    });
    try {
      const { services, instance } = test;
      assert.equal((await test.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
      await services.sessions.session(instance);
      await test.testStore.store.db
        .updateTable('nodes')
        .set({ host: 'host-2', pid: 77, incarnation: 'intruder', heartbeat_at: Date.now() })
        .where('id', '=', 'node-a')
        .execute();
      // At the next heartbeat (2 s for a cluster node).
      await eventually('the sessions closed', () => services.sessions.ids().length === 0, 10_000);
      assert.match(services.nodes.displaced ?? '', /^NODE_ID node-a was taken over by host-2 pid 77/);
      assert.equal((await test.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503);
      await assert.rejects(services.sessions.session(instance), { code: 'not_ready' });
    } finally {
      await test.close();
    }
  });
});
