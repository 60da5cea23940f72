import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { type Kysely, type KyselyPlugin, TableNode, UpdateQueryNode } from 'kysely';
import pino from 'pino';
import { ReadinessService } from '../../src/app/readiness.ts';
import { DomainError } from '../../src/domain/errors.ts';
import type { Instance } from '../../src/domain/instance.ts';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { leaseValid, leastLoaded, shareToTake } from '../../src/nodes/placement.ts';
import { NodeRegistry } from '../../src/nodes/registry.ts';
import { openStore } from '../../src/store/database.ts';
import { claimLease, getLease, listLeases, renewLeases, setNodeEndpoint } from '../../src/store/leases.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import type { Database } from '../../src/store/schema.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { fakeSessions, setup } from './lease-support.ts';

/**
 * Instance leases of several nodes (docs/decisions/0008-leases-and-fencing.md) on the real store: race-free claims
 * with a fencing token, renewal, placement of orphans by fair share, fencing of a session whose lease moved,
 * hand-over on drain, and routing.
 */

const logger = pino({ level: 'silent' });

/** A plugin answering every update of the `nodes` table (a node's endpoint, its heartbeat) `ms` late. */
function slowNodeWrites(ms: number): KyselyPlugin {
  const slow = new Set<unknown>();
  return {
    transformQuery({ node, queryId }) {
      if (UpdateQueryNode.is(node) && node.table && TableNode.is(node.table)) {
        if (node.table.table.identifier.name === 'nodes') slow.add(queryId);
      }
      return node;
    },
    async transformResult({ result, queryId }) {
      if (slow.delete(queryId)) await delay(ms);
      return result;
    },
  };
}

describe('placement (pure)', () => {
  const node = (id: string, draining = false) => ({ id, url: `http://${id}`, draining, heartbeatAt: 0 });
  it('picks the least-loaded serving node, ties by id, never a draining one', () => {
    const nodes = [node('c'), node('a', true), node('b')];
    assert.equal(
      leastLoaded(
        nodes,
        new Map([
          ['c', 1],
          ['a', 0],
          ['b', 1],
        ]),
      )?.id,
      'b',
    );
    assert.equal(
      leastLoaded(
        nodes,
        new Map([
          ['c', 0],
          ['a', 0],
          ['b', 2],
        ]),
      )?.id,
      'c',
    );
    assert.equal(leastLoaded([node('a', true)], new Map()), undefined);
  });
  it('a lease binds until it expires, whatever the registry says of its owner', () => {
    const lease = { instanceId: 'i', owner: 'a', token: 3, expiresAt: 1000 };
    assert.equal(leaseValid(lease, 999), true);
    assert.equal(leaseValid(lease, 1000), false, 'expired');
  });

  it('a node takes its fair share of orphans and nothing from running sessions', () => {
    const nodes = [node('a'), node('b'), node('c')];
    assert.equal(
      shareToTake({
        self: 'c',
        nodes,
        load: new Map([
          ['a', 3],
          ['b', 3],
        ]),
        orphans: 0,
      }),
      2,
    );
    assert.equal(
      shareToTake({
        self: 'a',
        nodes,
        load: new Map([
          ['a', 3],
          ['b', 3],
        ]),
        orphans: 3,
      }),
      0,
    );
    assert.equal(
      shareToTake({
        self: 'c',
        nodes,
        load: new Map([
          ['a', 3],
          ['b', 3],
        ]),
        orphans: 3,
      }),
      3,
    );
    assert.equal(shareToTake({ self: 'a', nodes: [node('a', true)], load: new Map(), orphans: 2 }), 0);
  });
});

/**
 * node-b holds the lease of `instance` until `expiresAt` (epoch ms) while its registry heartbeat lapsed long ago (it
 * lost the store; its socket may be open until it fences), and node-a is registered with an endpoint.
 */
async function ownerLooksDead(db: Kysely<Database>, instance: Instance, expiresAt: number): Promise<void> {
  await db.updateTable('nodes').set({ heartbeat_at: 1 }).where('id', '=', 'node-b').execute();
  await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
  await claimLease(db, { instanceId: instance.id, owner: 'node-b', previousToken: null, expiresAt });
}

for (const dialect of testDialects()) {
  describe(`instance leases (${dialect})`, () => {
    it('claims are conditional on the fencing token, which grows on every change of owner', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 1);
        const id = instances[0]?.id ?? '';
        const first = await claimLease(db, {
          instanceId: id,
          owner: 'node-a',
          previousToken: null,
          expiresAt: 10,
        });
        assert.deepEqual(first, { instanceId: id, owner: 'node-a', token: 1, expiresAt: 10 });
        assert.equal(
          await claimLease(db, { instanceId: id, owner: 'node-b', previousToken: null, expiresAt: 10 }),
          undefined,
        );
        const second = await claimLease(db, {
          instanceId: id,
          owner: 'node-b',
          previousToken: 1,
          expiresAt: 20,
        });
        assert.equal(second?.token, 2);
        assert.equal(
          await claimLease(db, { instanceId: id, owner: 'node-a', previousToken: 1, expiresAt: 30 }),
          undefined,
          'a stale token loses',
        );
        assert.deepEqual(await renewLeases(db, 'node-a', 99), []);
        assert.deepEqual(await renewLeases(db, 'node-b', 99), [
          { instanceId: id, owner: 'node-b', token: 2, expiresAt: 99 },
        ]);
      } finally {
        await testStore.cleanup();
      }
    });

    it('a session still connecting is asked again without being logged as restored again', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 1);
        const [first] = instances;
        assert.ok(first);
        const instance: Instance = {
          ...first,
          desiredState: 'connected',
          jid: '5511999990001:1@s.whatsapp.net',
        };
        // A live session's connect() returns while its connection attempt runs: it stays not connected.
        const connects: string[] = [];
        let made = false;
        const sessions = {
          restore: async (id: string) => {
            made = true;
            connects.push(id);
            return true;
          },
          existing: () =>
            made ? ({ state: () => ({ connected: false, loggedIn: true }) } as never) : undefined,
          release: async () => undefined,
          ids: () => [],
          // Still connecting: it comes back by itself.
          comingBack: () => true,
          restoreFailed: () => false,
        };
        const lines: string[] = [];
        const recording = pino(
          { level: 'info' },
          { write: (line: string) => void lines.push(JSON.parse(line).msg as string) },
        );
        const keeper = new LeaseKeeper({
          db,
          nodeId: 'node-a',
          sessions,
          logger: recording,
          heartbeatMs: 60_000,
        });
        for (let request = 0; request < 3; request++) await keeper.ensureRestored(instance);
        assert.deepEqual(connects, [instance.id, instance.id, instance.id], 'asked to connect each time');
        assert.deepEqual(
          lines.filter((line) => line === 'session restored on this node'),
          ['session restored on this node'],
          'logged once',
        );
      } finally {
        await testStore.cleanup();
      }
    });

    it('two nodes share orphans evenly, fence a lost instance, hand over on drain, and route by lease', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 4);
        const sessionsA = fakeSessions();
        const a = new LeaseKeeper({ db, nodeId: 'node-a', sessions: sessionsA, logger, heartbeatMs: 60_000 });
        await a.start('http://a.invalid');
        await a.stop();
        // node-b is registered with a URL but runs no keeper: node-a takes its half and leaves the rest.
        assert.equal(a.held().length, 2);
        await eventually('both sessions open on node-a', () => sessionsA.connected.length === 2);
        assert.deepEqual(new Set(sessionsA.connected), new Set(a.held()));
        const rows = await listLeases(db);
        assert.deepEqual(
          rows.map((row) => [row.owner, row.token]),
          [
            ['node-a', 1],
            ['node-a', 1],
          ],
        );

        // A request for an orphan is placed on the least-loaded node (node-b) and routed there.
        const orphan = instances.find((instance) => !a.held().includes(instance.id));
        assert.ok(orphan);
        assert.deepEqual(await a.route(orphan), { local: false, owner: 'node-b', url: 'http://b.invalid' });
        assert.equal((await getLease(db, orphan.id))?.owner, 'node-b');
        // Who holds what elsewhere: node-b the routed orphan; the last orphan stays unplaced, node-a's are not listed.
        const ids = instances.map((instance) => instance.id);
        assert.deepEqual(
          await a.remoteOwners(ids),
          new Map([['http://b.invalid', { owner: 'node-b', ids: [orphan.id] }]]),
        );
        assert.equal((await listLeases(db)).length, 3, 'remoteOwners placed nothing');
        const mine = instances.find((instance) => a.held().includes(instance.id));
        assert.ok(mine);
        assert.deepEqual(await a.route(mine), { local: true });

        // node-b takes one of node-a's instances: node-a's next heartbeat closes that session (fencing).
        const [lostId, keptId] = a.held();
        const lost = await getLease(db, lostId ?? '');
        assert.ok(lost);
        await claimLease(db, {
          instanceId: lost.instanceId,
          owner: 'node-b',
          previousToken: lost.token,
          expiresAt: Date.now() + 60_000,
        });
        await a.tick();
        assert.deepEqual(sessionsA.released, [lostId]);
        assert.ok(a.held().includes(keptId ?? ''));
        assert.ok(!a.held().includes(lostId ?? ''));
        // Its share is two again: it took the last orphan in the same round.
        assert.equal(a.held().length, 2);

        // Drain: node-a's instances go to node-b with the next token; each session is closed first.
        const before = await getLease(db, keptId ?? '');
        const held = a.held();
        await a.drain();
        const after = await getLease(db, keptId ?? '');
        assert.equal(after?.owner, 'node-b');
        assert.equal(after?.token, (before?.token ?? 0) + 1);
        assert.deepEqual(new Set(sessionsA.released), new Set([lostId, ...held]));
        assert.deepEqual(a.held(), []);
        assert.equal(
          (await db.selectFrom('nodes').select('draining').where('id', '=', 'node-a').executeTakeFirst())
            ?.draining,
          1,
        );
      } finally {
        await testStore.cleanup();
      }
    });

    it('a node that cannot renew closes its sessions a heartbeat before its leases expire (fencing)', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 2);
        // The keeper's own connection to the store, cut after the first round.
        const own = await openStore(testStore.database, testStore.schema ? { schema: testStore.schema } : {});
        const sessions = fakeSessions();
        // A slow store: the endpoint write that starts each round answers 60 ms late, so each renewal reads its
        // clock 60 ms after its heartbeat fired; checked at the next heartbeats, the sessions closed only about
        // 60 ms before the expiry.
        const a = new LeaseKeeper({
          db: own.db.withPlugin(slowNodeWrites(60)),
          nodeId: 'node-a',
          sessions,
          logger,
          heartbeatMs: 200,
          ttlMs: 1_200,
        });
        await a.start('http://a.invalid');
        // Node b stops heartbeating, so a later round may open the second instance here too.
        await eventually('a session open on node-a', () => sessions.connected.length >= 1);
        const [lease] = (await listLeases(db)).filter((row) => row.owner === 'node-a');
        assert.ok(lease);
        // Cut just after a renewal of the heartbeat (not the one `start` made before its first heartbeat).
        await eventually(
          'a renewal at a heartbeat',
          async () => ((await getLease(db, lease.instanceId))?.expiresAt ?? 0) > lease.expiresAt,
        );
        await own.destroy();
        // Every session the node opened is closed, each before its own lease expires. A heartbeat may have opened
        // the second instance's session before the connection was cut: fencing then closes both at once.
        await eventually(
          'every session closed',
          () => sessions.released.length > 0 && sessions.ids().length === 0,
        );
        assert.ok(sessions.released.includes(lease.instanceId));
        assert.deepEqual(new Set(sessions.released), new Set(sessions.connected));
        // Closed a heartbeat and a half (300 ms) before the expiry by a timer set at the last renewal; asserted with
        // half a heartbeat, leaving 200 ms for a late timer. Read at the next heartbeat instead, the close came a
        // few ms before the expiry (the renewal's clock is read after its first statement).
        for (const [index, id] of sessions.released.entries()) {
          const expiresAt = (await getLease(db, id))?.expiresAt ?? 0;
          const margin = expiresAt - (sessions.releasedAt[index] ?? Infinity);
          assert.ok(margin >= 100, `${id} closed ${margin} ms before its lease expired, not 100 ms or more`);
        }
        await a.stop();
        assert.equal(instances.length, 2);
      } finally {
        await testStore.cleanup();
      }
    });

    it('readiness is false while the node is not registered or draining, with the store up', async () => {
      const testStore = await createTestStore(dialect);
      try {
        let serving = false;
        const readiness = new ReadinessService({ store: testStore.store, registered: () => serving });
        await assert.rejects(readiness.check(), {
          code: 'not_ready',
          message: 'node is not registered or is handing its instances over',
        });
        serving = true;
        await readiness.check();
      } finally {
        await testStore.cleanup();
      }
    });

    it('a lease whose owner merely looks dead is not taken before it expires', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 1);
        const instance = instances[0];
        assert.ok(instance);
        let clock = Date.now();
        await ownerLooksDead(db, instance, clock + 60_000);
        const sessions = fakeSessions();
        const a = new LeaseKeeper({
          db,
          nodeId: 'node-a',
          sessions,
          logger,
          heartbeatMs: 1_000,
          ttlMs: 4_000,
          now: () => clock,
        });
        await a.tick();
        assert.deepEqual(a.held(), []);
        assert.deepEqual(await getLease(db, instance.id).then((lease) => [lease?.owner, lease?.token]), [
          'node-b',
          1,
        ]);
        assert.deepEqual(await a.remoteOwners([instance.id]), new Map(), 'no reachable owner to ask');
        // Once the lease expired, it is an orphan: node-a takes it with the next token.
        clock += 60_000;
        await db.updateTable('nodes').set({ heartbeat_at: clock }).where('id', '=', 'node-a').execute();
        await a.tick();
        assert.deepEqual(a.held(), [instance.id]);
        assert.deepEqual(await getLease(db, instance.id).then((lease) => [lease?.owner, lease?.token]), [
          'node-a',
          2,
        ]);
        await eventually('the restored session open', () => sessions.connected.length === 1);
      } finally {
        await testStore.cleanup();
      }
    });

    it('a request for an instance whose owner looks dead waits a heartbeat at a time, then answers 503, never serves it here', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 1);
        const instance = instances[0];
        assert.ok(instance);
        const clock = Date.now();
        // node-b renews its lease (the test's clock stands still) without showing in the registry.
        await ownerLooksDead(db, instance, clock + 60_000);
        const sessions = fakeSessions();
        const a = new LeaseKeeper({
          db,
          nodeId: 'node-a',
          sessions,
          logger,
          heartbeatMs: 20,
          ttlMs: 80,
          now: () => clock,
        });
        await assert.rejects(a.route(instance), (error: unknown) => {
          assert.ok(error instanceof DomainError);
          assert.deepEqual(
            [error.code, error.message],
            ['not_ready', 'the node holding this instance does not answer; retry'],
          );
          return true;
        });
        assert.deepEqual(sessions.connected, [], 'not served here');
        // Its owner shows again while a request waits: the request goes there.
        await setNodeEndpoint(db, 'node-b', { url: 'http://b.invalid', draining: false });
        const routing = a.route(instance);
        await db.updateTable('nodes').set({ heartbeat_at: clock }).where('id', '=', 'node-b').execute();
        assert.deepEqual(await routing, { local: false, owner: 'node-b', url: 'http://b.invalid' });
      } finally {
        await testStore.cleanup();
      }
    });

    it("a lease whose owner's process is gone is taken over at once", async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instances } = await setup(testStore, 1);
        const instance = instances[0];
        assert.ok(instance);
        await claimLease(db, {
          instanceId: instance.id,
          owner: 'node-gone',
          previousToken: null,
          expiresAt: Date.now() + 60_000,
        });
        await db.deleteFrom('nodes').where('id', '=', 'node-b').execute();
        // node-gone ran in this process space, with a fresh heartbeat; its process no longer exists. The registry's
        // sweep forgets it and expires its leases.
        await upsertNode(db, {
          id: 'node-gone',
          host: hostname(),
          pid: 999_999,
          startedAt: new Date().toISOString(),
          heartbeatAt: Date.now(),
          processSpace: 'this-machine/pid:[1]',
        });
        const registry = new NodeRegistry({
          db,
          logger,
          id: 'node-a',
          processAlive: () => false,
          processSpace: 'this-machine/pid:[1]',
        });
        await registry.sweep();
        assert.ok(((await getLease(db, instance.id))?.expiresAt ?? Infinity) <= Date.now(), 'expired');
        // The dead owner's one-socket lock, still unexpired.
        await db
          .insertInto('instance_locks')
          .values({
            instance_id: instance.id,
            owner: 'node-gone',
            acquired_at: Date.now(),
            expires_at: Date.now() + 30_000,
          })
          .execute();
        const sessions = fakeSessions();
        const a = new LeaseKeeper({ db, nodeId: 'node-a', sessions, logger, heartbeatMs: 60_000 });
        await a.start('http://a.invalid');
        await a.stop();
        assert.deepEqual(a.held(), [instance.id]);
        assert.deepEqual(await getLease(db, instance.id).then((lease) => [lease?.owner, lease?.token]), [
          'node-a',
          2,
        ]);
        await eventually('the restored session open', () => sessions.connected.length === 1);
        assert.deepEqual(
          await db.selectFrom('instance_locks').selectAll().execute(),
          [],
          'stale lock dropped',
        );
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
