import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { NodeRegistry } from '../../src/nodes/registry.ts';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { listLeases, setNodeEndpoint } from '../../src/store/leases.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { fakeSessions, setup } from './lease-support.ts';

/**
 * Lease expiries, node heartbeats and the one-socket locks' expiries are judged on one clock, the store's
 * (docs/decisions/0008-leases-and-fencing.md, "One clock"), never on a node's wall clock, which can step (an NTP step,
 * a VM resumed, a bad clock at boot). Judged on its own, a node stepped forward by more than a lease lifetime read
 * every other node as dead and every lease as expired: it took the live owner's leases (both opened the sessions) and
 * its sweep deleted the owner's row and released its webhook claims; an owner stepped back wrote expiries already past
 * for its peers. PostgreSQL only: it is what several nodes share (a SQLite store is one process, whose clock is the
 * store's). A node whose clock runs ahead took another's live one-socket lock too, and one running behind wrote lock
 * expiries already past.
 */

const logger = pino({ level: 'silent' });

/** A lease lifetime and more, ms. */
const STEP_MS = 60_000;

/**
 * Runs `make` with this process's wall clock (`Date.now`) stepped by `stepMs`, and restores it: what `make` builds
 * keeps the stepped clock wherever it took `Date.now` as its wall clock, as a node on a machine whose clock stepped.
 */
function withWallClockStepped<T>(stepMs: number, make: () => T): T {
  const real = Date.now;
  Date.now = () => real() + stepMs;
  try {
    return make();
  } finally {
    Date.now = real;
  }
}

describe('a node whose wall clock steps (postgres)', { skip: !testDialects().includes('postgres') }, () => {
  it('stepped forward past a lease lifetime, takes no lease from a live node and sweeps no live node', async () => {
    const testStore = await createTestStore('postgres');
    try {
      const { db, instances } = await setup(testStore, 4);
      const sessionsA = fakeSessions();
      const sessionsB = fakeSessions();
      const a = new LeaseKeeper({ db, nodeId: 'node-a', sessions: sessionsA, logger });
      await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
      await a.tick();
      const heldA = a.held();
      assert.equal(heldA.length, 2, 'node-a took its share');
      const [registryB, b] = withWallClockStepped(STEP_MS, () => [
        new NodeRegistry({ db, logger, id: 'node-b', heartbeatMs: 2000, deadAfterMs: 8000 }),
        new LeaseKeeper({ db, nodeId: 'node-b', sessions: sessionsB, logger }),
      ]);
      assert.equal(await registryB.sweep(), 0, 'no webhook claim released');
      const rows = await db.selectFrom('nodes').select('id').orderBy('id').execute();
      assert.deepEqual(
        rows.map((row) => row.id),
        ['node-a', 'node-b'],
        'the live node-a is still registered',
      );
      await b.tick();
      assert.deepEqual(
        b.held().filter((id) => heldA.includes(id)),
        [],
        'node-b took leases node-a holds',
      );
      assert.equal(b.held().length, 2, 'node-b took the orphans only');
      assert.deepEqual(
        sessionsB.ids().filter((id) => sessionsA.ids().includes(id)),
        [],
        'a session open on both nodes',
      );
      await a.tick();
      assert.deepEqual(a.held().sort(), [...heldA].sort(), 'node-a still holds its leases');
      assert.equal(instances.length, 4);
    } finally {
      await testStore.cleanup();
    }
  });

  it('stepped back past a lease lifetime on an owner, keeps its leases valid for its peers', async () => {
    const testStore = await createTestStore('postgres');
    try {
      const { db } = await setup(testStore, 2);
      const sessionsA = fakeSessions();
      const sessionsB = fakeSessions();
      const a = withWallClockStepped(
        -STEP_MS,
        () => new LeaseKeeper({ db, nodeId: 'node-a', sessions: sessionsA, logger }),
      );
      await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
      await a.tick();
      await a.tick();
      const heldA = a.held();
      assert.ok(heldA.length > 0, 'node-a holds leases');
      for (const lease of await listLeases(db)) {
        if (lease.owner === 'node-a')
          assert.ok(lease.expiresAt > Date.now(), `node-a wrote an expiry already past: ${lease.expiresAt}`);
      }
      const b = new LeaseKeeper({ db, nodeId: 'node-b', sessions: sessionsB, logger });
      await b.tick();
      assert.deepEqual(
        b.held().filter((id) => heldA.includes(id)),
        [],
        'node-b took leases node-a holds',
      );
    } finally {
      await testStore.cleanup();
    }
  });

  it('the one-socket lock: stepped forward, takes no live lock; stepped back, writes no expiry past for its peers', async () => {
    const testStore = await createTestStore('postgres');
    try {
      const { db, instances } = await setup(testStore, 2);
      const [live, lapsed] = instances;
      assert.ok(live && lapsed);
      /** Node `owner`'s locks as the services make them: on the node's store clock; its sessions on its wall clock. */
      const node = async (owner: string, stepMs: number) => {
        const clock = withWallClockStepped(stepMs, () => new StoreClock({ db, logger }));
        await clock.sync();
        const locks = new SqlSessionLocks({ db, owner, clock: () => clock.now(), heartbeatMs: 60_000 });
        return (instanceId: string) =>
          locks.forInstance(instanceId, { clock: () => Date.now() + stepMs, onLost: () => undefined });
      };
      const a = await node('node-a', 0);
      const ahead = await node('node-ahead', STEP_MS);
      const behind = await node('node-behind', -STEP_MS);
      const heldByA = a(live.id);
      assert.deepEqual(await heldByA.acquire(), { acquired: true });
      const taken = await ahead(live.id).acquire();
      assert.equal(taken.acquired, false, "a node whose clock runs ahead took node-a's live lock");

      // A lapsed lock (its holder died a while ago, on the store's clock) is taken back by a node running behind, and
      // the expiry it writes holds against a node on time.
      await db
        .insertInto('instance_locks')
        .values({
          instance_id: lapsed.id,
          owner: 'node-dead',
          acquired_at: Date.now() - 40_000,
          expires_at: Date.now() - 10_000,
        })
        .execute();
      const byBehind = behind(lapsed.id);
      assert.deepEqual(
        await byBehind.acquire(),
        { acquired: true },
        'a node whose clock runs behind never took it back',
      );
      const row = await db
        .selectFrom('instance_locks')
        .select('expires_at')
        .where('instance_id', '=', lapsed.id)
        .executeTakeFirstOrThrow();
      assert.ok(
        Number(row.expires_at) > Date.now(),
        `node-behind wrote an expiry already past: ${row.expires_at}`,
      );
      assert.equal((await a(lapsed.id).acquire()).acquired, false, "node-a took node-behind's live lock");
      await heldByA.release();
      await byBehind.release();
    } finally {
      await testStore.cleanup();
    }
  });
});
