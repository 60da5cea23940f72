import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import pino from 'pino';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { claimLease, getLease, renewLeases, setNodeEndpoint } from '../../src/store/leases.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import type { Database } from '../../src/store/schema.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { fakeSessions, setup } from './lease-support.ts';

/**
 * A node whose leases expired (its event loop blocked, or its renewals failed while the store restarted) must not
 * extend them on resuming (docs/decisions/0008-leases-and-fencing.md): another node may have read them as orphans
 * already, and its claim is conditional on the fencing token only. Extending without a new token let both nodes own
 * the instance and open its session; the owner now takes an expired lease back by a claim, which moves the token, so
 * one of the two claims loses.
 */

const logger = pino({ level: 'silent' });

/**
 * `db` whose first `executeTakeFirst` of an `updateTable` (the conditional claim of a node that read the lease as
 * expired) runs `hook` first; every other statement runs unchanged.
 */
function hookBeforeClaim(db: Kysely<Database>, hook: () => Promise<void>): Kysely<Database> {
  let fired = false;
  const defer = (builder: object): object =>
    new Proxy(builder, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (typeof value !== 'function') return value;
        if (prop === 'executeTakeFirst' && !fired) {
          return async (...args: unknown[]) => {
            fired = true;
            await hook();
            return value.apply(target, args);
          };
        }
        return (...args: unknown[]) => {
          const result: unknown = value.apply(target, args);
          return typeof result === 'object' && result !== null && 'executeTakeFirst' in result
            ? defer(result)
            : result;
        };
      },
    });
  return new Proxy(db, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (typeof value !== 'function') return value;
      if (prop === 'updateTable') return (...args: unknown[]) => defer(value.apply(target, args));
      return value.bind(target);
    },
  });
}

for (const dialect of testDialects()) {
  describe(`renewing an expired lease (${dialect})`, () => {
    it('renews only the leases still unexpired', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 2);
        const [live, expired] = instances.map((instance) => instance.id);
        for (const [instanceId, expiresAt] of [
          [live, 2_000],
          [expired, 1_000],
        ] as const)
          await db
            .insertInto('instance_leases')
            .values({ instance_id: instanceId ?? '', owner: 'node-a', token: 1, expires_at: expiresAt })
            .execute();
        assert.deepEqual(await renewLeases(db, 'node-a', 9_000, 1_500), [
          { instanceId: live, owner: 'node-a', token: 1, expiresAt: 9_000 },
        ]);
        assert.equal((await getLease(db, expired ?? ''))?.expiresAt, 1_000, 'left expired, for a claim');
      } finally {
        await testStore.cleanup();
      }
    });

    it("a claim loses to the owner's renewal since the claimer read the lease, whatever the owner's clock said", async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 1);
        const id = instances[0]?.id ?? '';
        await claimLease(db, { instanceId: id, owner: 'node-a', previousToken: null, expiresAt: 1_000 });
        // node-b reads the lease as expired at 2 000; node-a, whose round read its clock before it stalled, renews.
        const read = await getLease(db, id);
        assert.deepEqual(read, { instanceId: id, owner: 'node-a', token: 1, expiresAt: 1_000 });
        await renewLeases(db, 'node-a', 5_000, 900);
        const taken = await claimLease(db, {
          instanceId: id,
          owner: 'node-b',
          previousToken: read?.token ?? null,
          previousExpiresAt: read?.expiresAt,
          expiresAt: 6_000,
        });
        assert.equal(taken, undefined);
        assert.deepEqual(await getLease(db, id), {
          instanceId: id,
          owner: 'node-a',
          token: 1,
          expiresAt: 5_000,
        });
      } finally {
        await testStore.cleanup();
      }
    });

    it('a node renewing its expired lease and a node taking it over do not both own the instance', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 1);
        const id = instances[0]?.id ?? '';
        let clock = Date.now();
        const beat = async () => {
          for (const node of ['node-a', 'node-b']) {
            await upsertNode(db, {
              id: node,
              host: 'h',
              pid: 1,
              startedAt: new Date().toISOString(),
              heartbeatAt: clock,
            });
            await setNodeEndpoint(db, node, { url: `http://${node}.invalid`, draining: false });
          }
        };
        await beat();
        const sessionsA = fakeSessions();
        const sessionsB = fakeSessions();
        const options = { logger, heartbeatMs: 1_000, ttlMs: 4_000, now: () => clock };
        const a = new LeaseKeeper({ ...options, db, nodeId: 'node-a', sessions: sessionsA });
        // node-a takes the instance (node-b is registered but holds nothing).
        await a.tick();
        assert.deepEqual(a.held(), [id]);
        await eventually('node-a has the session open', () => sessionsA.connected.includes(id));

        // node-a stalls past its lease; both nodes heartbeat again.
        clock += 5_000;
        await beat();
        // node-b reads the lease as expired; node-a resumes and runs its round before node-b's claim.
        const b = new LeaseKeeper({
          ...options,
          db: hookBeforeClaim(db, () => a.tick()),
          nodeId: 'node-b',
          sessions: sessionsB,
        });
        await b.tick();

        const owners = [a, b].filter((keeper) => keeper.held().includes(id)).map((keeper) => keeper.nodeId);
        assert.deepEqual(owners, ['node-a'], JSON.stringify(await getLease(db, id)));
        const lease = await getLease(db, id);
        assert.deepEqual([lease?.owner, lease?.token], ['node-a', 2], 'taken back by a claim: a new token');
        await eventually('node-a has the session open again', () => sessionsA.connected.length === 2);
        assert.deepEqual(sessionsB.connected, [], 'node-b opened nothing');
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
