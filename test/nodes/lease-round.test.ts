import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { type KyselyPlugin, TableNode, UpdateQueryNode } from 'kysely';
import pino from 'pino';
import { DomainError } from '../../src/domain/errors.ts';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { claimLease, getLease, setNodeEndpoint } from '../../src/store/leases.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { fakeSessions, setup } from './lease-support.ts';

/**
 * The lease round and the closes it starts (docs/decisions/0008-leases-and-fencing.md). A session whose lease moved
 * is closed apart from the round: a live session's close lasts until the events its socket received are recorded
 * (seconds with a busy store), and a round waiting for it renewed no lease, so the fencing timer closed every other
 * session of the node although the store answered. A restore of the instance here waits for its close to end. Once
 * the fencing timer fired, nothing is restored here and no lease claimed for this node until a renewal arms it
 * again: the lease still looks valid for a heartbeat and a half, and a session opened then would outlive it.
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

/** A plugin failing every update of the `nodes` table (the endpoint write that starts each round) while `down()`. */
function failingRounds(down: () => boolean): KyselyPlugin {
  return {
    transformQuery({ node }) {
      if (down() && UpdateQueryNode.is(node) && node.table && TableNode.is(node.table)) {
        if (node.table.table.identifier.name === 'nodes') throw new Error('the store is away (test)');
      }
      return node;
    },
    async transformResult({ result }) {
      return result;
    },
  };
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

    it('once the fencing timer fired, nothing is restored here and no lease claimed for this node', async () => {
      const testStore = await createTestStore(dialect);
      let keeper: LeaseKeeper | undefined;
      try {
        const { db, instances } = await setup(testStore, 2);
        const [mine, orphan] = instances;
        assert.ok(mine && orphan);
        // node-b is gone: node-a is the only node a new instance could be placed on. `orphan` is not wanted connected
        // (no round claims it), and has no lease until a request places it.
        await db.updateTable('nodes').set({ heartbeat_at: 1 }).where('id', '=', 'node-b').execute();
        await db
          .updateTable('instances')
          .set({ desired_state: 'disconnected' })
          .where('id', '=', orphan.id)
          .execute();
        await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
        let down = false;
        const sessions = fakeSessions();
        const allowed: boolean[] = [];
        const restore = sessions.restore.bind(sessions);
        // The session manager asks `allowed` right before the session connects.
        const restoring = (id: string, _listed?: unknown, may?: () => boolean) => {
          allowed.push(may?.() ?? true);
          return may === undefined || may() ? restore(id) : Promise.resolve(false);
        };
        sessions.restore = restoring;
        const heartbeatMs = 400;
        const ttlMs = 2_000;
        await claimLease(db, {
          instanceId: mine.id,
          owner: 'node-a',
          previousToken: null,
          expiresAt: Date.now() + ttlMs,
        });
        keeper = new LeaseKeeper({
          db: db.withPlugin(failingRounds(() => down)),
          nodeId: 'node-a',
          sessions,
          logger,
          heartbeatMs,
          ttlMs,
        });
        await keeper.start('http://a.invalid');
        await eventually('mine restored', () => sessions.ids().includes(mine.id));
        // Renewals fail from now on: the fencing timer closes the session a heartbeat and a half before the expiry.
        down = true;
        await eventually('the fence closed mine', () => sessions.released.includes(mine.id), 5_000);
        const lease = await getLease(db, mine.id);
        assert.ok(
          lease && lease.owner === 'node-a' && lease.expiresAt > Date.now(),
          'the lease still looks valid',
        );
        const restores = sessions.connected.length;

        // A request for it reaches this node while its lease still looks valid: refused, nothing restored.
        await assert.rejects(
          keeper.route(mine),
          (error: unknown) => error instanceof DomainError && error.code === 'not_ready',
        );
        // Nor does a round's restore path open it, nor a new instance get a lease of this node.
        await keeper.ensureRestored(mine);
        await assert.rejects(
          keeper.route(orphan),
          (error: unknown) => error instanceof DomainError && error.code === 'not_ready',
        );
        assert.equal(
          await getLease(db, orphan.id),
          undefined,
          'a lease was claimed for a node that cannot renew',
        );
        assert.equal(sessions.connected.length, restores, 'restored after the fence fired');
        assert.deepEqual(sessions.ids(), []);
        assert.deepEqual(allowed, [true]);

        // The store answers again: the next renewal arms the timer, and the instance is served here again.
        down = false;
        await eventually('served here again', async () => {
          try {
            return (await keeper?.route(mine))?.local === true;
          } catch {
            return false;
          }
        });
        assert.ok(sessions.ids().includes(mine.id));
      } finally {
        await keeper?.stop();
        await testStore.cleanup();
      }
    });
  });
}
