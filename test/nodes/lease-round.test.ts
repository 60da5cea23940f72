import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import pino from 'pino';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { claimLease, getLease, setNodeEndpoint } from '../../src/store/leases.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { fakeSessions, setup } from './lease-support.ts';

/**
 * The lease round and the closes it starts (docs/decisions/0008-leases-and-fencing.md). A session whose lease moved
 * is closed apart from the round: a live session's close lasts until the events its socket received are recorded
 * (seconds with a busy store), and a round waiting for it renewed no lease, so the fencing timer closed every other
 * session of the node although the store answered. A restore of the instance here waits for its close to end.
 */

const logger = pino({ level: 'silent' });

/** A gate a test opens: `wait()` resolves once `open()` ran. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait: () => opened, open };
}

for (const dialect of testDialects()) {
  describe(`the lease round and the closes it starts (${dialect})`, () => {
    it('a slow close of a session whose lease moved holds no renewal: the other sessions stay open', async () => {
      const testStore = await createTestStore(dialect);
      let keeper: LeaseKeeper | undefined;
      const closing = gate();
      try {
        const { db, instances } = await setup(testStore, 3);
        const [moved, ...kept] = instances.map((instance) => instance.id);
        assert.ok(moved);
        await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
        const sessions = fakeSessions();
        const release = sessions.release.bind(sessions);
        const closes: string[] = [];
        // The session of `moved` closes only when the test lets it (its received events still being recorded).
        sessions.release = async (id: string) => {
          closes.push(id);
          if (id === moved) await closing.wait();
          await release(id);
        };
        const heartbeatMs = 200;
        const ttlMs = 800;
        for (const id of [moved, ...kept])
          await claimLease(db, {
            instanceId: id,
            owner: 'node-a',
            previousToken: null,
            expiresAt: Date.now() + ttlMs,
          });
        keeper = new LeaseKeeper({ db, nodeId: 'node-a', sessions, logger, heartbeatMs, ttlMs });
        await keeper.start('http://a.invalid');
        await eventually('three sessions open', () => sessions.ids().length === 3);
        // Another node took `moved` (its lease handed to it elsewhere).
        await db
          .updateTable('instance_leases')
          .set({ owner: 'node-b', token: 99, expires_at: Date.now() + 60_000 })
          .where('instance_id', '=', moved)
          .execute();
        await eventually('the close of moved started', () => closes.includes(moved));
        // Longer than the lease lifetime: the renewals went on while the close ran.
        await delay(2 * ttlMs);
        assert.deepEqual(
          sessions.released.filter((id) => kept.includes(id)),
          [],
          'a session whose lease this node held was closed',
        );
        assert.deepEqual(closes, [moved], 'the close is started once, not at every round');
        for (const id of kept) {
          const lease = await getLease(db, id);
          assert.equal(lease?.owner, 'node-a');
          assert.ok((lease?.expiresAt ?? 0) > Date.now(), `the lease of ${id} was not renewed`);
        }
        closing.open();
        await eventually('moved closed', () => sessions.released.includes(moved));
      } finally {
        closing.open();
        await keeper?.stop();
        await testStore.cleanup();
      }
    });

    it('a restore of an instance whose close still runs here starts once that close ended', async () => {
      const testStore = await createTestStore(dialect);
      const closing = gate();
      try {
        const { db, instances } = await setup(testStore, 1);
        const [instance] = instances;
        assert.ok(instance);
        await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
        const sessions = fakeSessions();
        const release = sessions.release.bind(sessions);
        const log: string[] = [];
        sessions.release = async (id: string) => {
          log.push('close started');
          await closing.wait();
          await release(id);
          log.push('closed');
        };
        const restore = sessions.restore.bind(sessions);
        sessions.restore = async (id: string) => {
          log.push('restored');
          return restore(id);
        };
        const keeper = new LeaseKeeper({ db, nodeId: 'node-a', sessions, logger, heartbeatMs: 60_000 });
        await claimLease(db, {
          instanceId: instance.id,
          owner: 'node-b',
          previousToken: null,
          expiresAt: Date.now() + 60_000,
        });
        await sessions.restore(instance.id);
        log.length = 0;
        // node-b holds the lease: the round starts the close and returns without waiting for it.
        await keeper.tick();
        assert.deepEqual(log, ['close started']);
        // The lease comes back to this node (node-b handed it back) before the close ended.
        await db
          .updateTable('instance_leases')
          .set({ owner: 'node-a', token: 100 })
          .where('instance_id', '=', instance.id)
          .execute();
        const restoring = keeper.ensureRestored(instance);
        await delay(50);
        assert.deepEqual(log, ['close started'], 'restored while the old session still closed');
        closing.open();
        await restoring;
        assert.deepEqual(log, ['close started', 'closed', 'restored']);
      } finally {
        closing.open();
        await testStore.cleanup();
      }
    });
  });
}
