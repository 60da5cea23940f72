import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { type Kysely, sql } from 'kysely';
import pino from 'pino';
import { SessionReleasedError } from '../../src/domain/errors.ts';
import type { Instance } from '../../src/domain/instance.ts';
import type { EngineSessionContext } from '../../src/engines/engine.ts';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { SecretBox } from '../../src/security/secrets.ts';
import type { SessionManager } from '../../src/sessions/manager.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { claimLease, getLease, setNodeEndpoint } from '../../src/store/leases.ts';
import type { Database } from '../../src/store/schema.ts';
import { eventually } from '../support/eventually.ts';
import { sessionsWithContexts } from '../support/fake-engine.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { setup } from './lease-support.ts';

/**
 * A session's key writes are fenced by its lease's token (docs/decisions/0008-leases-and-fencing.md): a write lands
 * only while the instance's lease still names the node and token the session was made under, read in the write's own
 * transaction. The release of a session stops its writes from then on; this closes the instant before, a write in
 * flight when another node takes the lease, which would otherwise overwrite the keys the new owner reads and writes.
 */

const logger = pino({ level: 'silent' });
const KEY = { category: 'session', id: 'peer.0' };

/** The sealed-then-opened value of the test key of `instanceId`, or undefined. */
async function keyValue(store: SqlAuthStateStore): Promise<string | undefined> {
  return (await store.get(KEY.category, [KEY.id])).get(KEY.id);
}

/** Lets `instanceId`'s lease lapse and gives it to node-b, as node-b's claim of an orphan does. */
async function nodeBTakesOver(db: Kysely<Database>, instanceId: string): Promise<void> {
  const lease = await getLease(db, instanceId);
  assert.ok(lease);
  await db
    .updateTable('instance_leases')
    .set({ expires_at: 1 })
    .where('instance_id', '=', instanceId)
    .execute();
  const taken = await claimLease(db, {
    instanceId,
    owner: 'node-b',
    previousToken: lease.token,
    previousExpiresAt: 1,
    expiresAt: Date.now() + 60_000,
  });
  assert.equal(taken?.token, lease.token + 1);
}

/** One instance of a new organization (lease-support.ts `setup`) whose lease node-a holds, token 1, for a minute. */
async function leasedToNodeA(testStore: TestStore): Promise<{ db: Kysely<Database>; instance: Instance }> {
  const { db, instances } = await setup(testStore, 1);
  const [instance] = instances;
  assert.ok(instance);
  await claimLease(db, {
    instanceId: instance.id,
    owner: 'node-a',
    previousToken: null,
    expiresAt: Date.now() + 60_000,
  });
  return { db, instance };
}

/** A session manager on `db` whose engine hands each session's context (its key port) to `contexts`. */
function fencedSessions(db: Kysely<Database>): {
  sessions: SessionManager;
  contexts: EngineSessionContext[];
} {
  return sessionsWithContexts(db, { record: async () => undefined, drain: async () => undefined });
}

for (const dialect of testDialects()) {
  describe(`key writes fenced by the lease's token (${dialect})`, () => {
    it('a fenced store writes while its lease carries its owner and token, and nothing once another node took it', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instance } = await leasedToNodeA(testStore);
        const instanceId = instance.id;
        const box = new SecretBox(randomBytes(32));
        const a = new SqlAuthStateStore(db, box, instanceId, { fence: { owner: 'node-a', token: 1 } });
        await a.set([{ ...KEY, value: 'ratchet 1' }]);
        assert.equal(await keyValue(a), 'ratchet 1');

        await nodeBTakesOver(db, instanceId);
        await assert.rejects(a.set([{ ...KEY, value: 'stale ratchet' }]), SessionReleasedError);
        await assert.rejects(a.clear(), SessionReleasedError);
        assert.equal(await keyValue(a), 'ratchet 1', 'the stale write and clear changed nothing');

        // The new owner's session writes under its own token; node-a's old token never passes again.
        const b = new SqlAuthStateStore(db, box, instanceId, { fence: { owner: 'node-b', token: 2 } });
        await b.set([{ ...KEY, value: 'ratchet 2' }]);
        assert.equal(await keyValue(b), 'ratchet 2');
        await assert.rejects(a.set([{ ...KEY, value: 'stale again' }]), SessionReleasedError);
        assert.equal(await keyValue(b), 'ratchet 2');
      } finally {
        await testStore.cleanup();
      }
    });

    it("a session made under this node's lease (the keeper's) has its key writes refused once the lease moved", async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instance } = await leasedToNodeA(testStore);
        const instanceId = instance.id;
        const { sessions, contexts } = fencedSessions(db);
        const keeper = new LeaseKeeper({ db, nodeId: 'node-a', sessions, logger, heartbeatMs: 60_000 });
        sessions.fenceWith(keeper);
        // The keeper renews node-a's lease and restores the instance's session under it.
        await keeper.tick();
        assert.deepEqual(keeper.fenceOf(instanceId), { owner: 'node-a', token: 1 });
        await eventually('the session restored on node-a', () => contexts.length === 1);
        const [context] = contexts;
        assert.ok(context);
        await context.auth.set([{ ...KEY, value: 'ratchet 1' }]);

        await nodeBTakesOver(db, instanceId);
        // The session is not released yet (node-a's next heartbeat would): its write is refused by the fence.
        await assert.rejects(context.auth.set([{ ...KEY, value: 'stale ratchet' }]), SessionReleasedError);
        const rows = await db
          .selectFrom('engine_auth')
          .select('key_id')
          .where('instance_id', '=', instanceId)
          .execute();
        assert.equal(rows.length, 1);
        const reader = new SqlAuthStateStore(db, new SecretBox(randomBytes(32)), instanceId);
        await assert.rejects(keyValue(reader), 'sealed with the session box: unreadable with another');
        await sessions.closeAll();
      } finally {
        await testStore.cleanup();
      }
    });

    it('a session of a lease this node let lapse and claimed again is made again under the new token', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const { db, instance } = await leasedToNodeA(testStore);
        // node-a alone serves (node-b's heartbeat is long gone).
        await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
        await db.updateTable('nodes').set({ heartbeat_at: 1 }).where('id', '=', 'node-b').execute();
        const { sessions, contexts } = fencedSessions(db);
        const keeper = new LeaseKeeper({ db, nodeId: 'node-a', sessions, logger, heartbeatMs: 60_000 });
        sessions.fenceWith(keeper);
        assert.deepEqual(await keeper.route(instance), { local: true });
        const [first] = contexts;
        assert.ok(first);
        await first.auth.set([{ ...KEY, value: 'ratchet 1' }]);

        // The lease lapsed (a stalled process) with the session still here; a request claims it again.
        await db
          .updateTable('instance_leases')
          .set({ expires_at: 1 })
          .where('instance_id', '=', instance.id)
          .execute();
        assert.deepEqual(await keeper.route(instance), { local: true });
        assert.equal((await getLease(db, instance.id))?.token, 2);
        assert.equal(contexts.length, 2, 'the session made again under token 2');
        const second = contexts[1];
        assert.ok(second);
        await second.auth.set([{ ...KEY, value: 'ratchet 2' }]);
        await assert.rejects(first.auth.set([{ ...KEY, value: 'stale ratchet' }]), SessionReleasedError);
        await sessions.closeAll();
      } finally {
        await testStore.cleanup();
      }
    });

    if (dialect === 'postgres') {
      it('a claim of the lease waits for a fenced write in flight, so the write never lands after it', async () => {
        const testStore = await createTestStore(dialect);
        try {
          const { db, instance } = await leasedToNodeA(testStore);
          const instanceId = instance.id;
          const box = new SecretBox(randomBytes(32));
          const a = new SqlAuthStateStore(db, box, instanceId, { fence: { owner: 'node-a', token: 1 } });
          await a.set([{ ...KEY, value: 'ratchet 1' }]);

          // Another transaction holds the key's row, so node-a's next write stops inside its transaction, after
          // its lease was read.
          let letGo = () => {};
          const held = new Promise<void>((resolve) => {
            letGo = resolve;
          });
          let locked = () => {};
          const rowLocked = new Promise<void>((resolve) => {
            locked = resolve;
          });
          let holderPid = 0;
          const holder = db.transaction().execute(async (trx) => {
            const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
            holderPid = rows[0]?.pid ?? 0;
            await trx
              .selectFrom('engine_auth')
              .select('key_id')
              .where('instance_id', '=', instanceId)
              .forUpdate()
              .execute();
            locked();
            await held;
          });
          await rowLocked;
          let written = false;
          const write = a.set([{ ...KEY, value: 'ratchet 2' }]).then(() => {
            written = true;
          });
          let writerPid = 0;
          await eventually('the write waiting for the key row', async () => {
            writerPid = (await blockedBy(db, holderPid))[0] ?? 0;
            return writerPid !== 0;
          });

          let claimed = false;
          const claim = nodeBTakesOver(db, instanceId).then(() => {
            claimed = true;
          });
          // Without the fence's share lock the claim would commit here, with the write still to land after it.
          await eventually(
            'the claim waiting for the write, or done',
            async () => claimed || (await blockedBy(db, writerPid)).length > 0,
          );
          assert.equal(
            claimed,
            false,
            'the lease changed owner while a write of its old owner was in flight',
          );
          letGo();
          await holder;
          await Promise.all([write, claim]);
          assert.ok(written);
          assert.equal((await getLease(db, instanceId))?.owner, 'node-b');
          // The write committed before the claim: the new owner, reading after its claim, reads it.
          assert.equal(await keyValue(new SqlAuthStateStore(db, box, instanceId)), 'ratchet 2');
          await assert.rejects(a.set([{ ...KEY, value: 'stale ratchet' }]), SessionReleasedError);
        } finally {
          await testStore.cleanup();
        }
      });
    }
  });
}

/** The server processes waiting for a lock that server process `pid` holds. */
async function blockedBy(db: Kysely<Database>, pid: number): Promise<number[]> {
  const { rows } = await sql<{ pid: number }>`
    select pid from pg_stat_activity where ${pid} = any(pg_blocking_pids(pid))`.execute(db);
  return rows.map((row) => row.pid);
}
