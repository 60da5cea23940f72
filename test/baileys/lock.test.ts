import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import { CLOSE_HANDSHAKE_MS } from '../../src/engines/baileys/socket.ts';
import type { SessionLocks } from '../../src/engines/engine.ts';
import { statusOf } from '../../src/http/errors.ts';
import { InstanceLock, SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { type FakeSocket, fakeFactory, storePairedCreds } from './fake-socket.ts';
import {
  type LiveFixture,
  liveFixture,
  recordingContext,
  silentLogger,
  until,
  untilAsync,
} from './support.ts';

for (const dialect of testDialects()) {
  describe(`one-socket lock (${dialect})`, () => {
    let fixture: LiveFixture;
    before(async () => {
      fixture = await liveFixture(dialect, 9);
    });
    after(async () => {
      await fixture.test.cleanup();
    });
    const lock = (
      i: number,
      owner: string,
      clock: () => number = Date.now,
      ttlMs = 30_000,
      lost: string[] = [],
    ) =>
      new InstanceLock({
        db: fixture.test.store.db,
        instanceId: fixture.instanceIds[i] ?? '',
        owner,
        clock,
        ttlMs,
        heartbeatMs: 60_000,
        onLost: (reason) => lost.push(reason),
      });

    /**
     * An engine of process `host-a:1` renewing its locks every 20 ms, with the fake sockets it opens, and the
     * recording context of `instanceId` holding paired credentials.
     */
    const pairedEngine = async (instanceId: string) => {
      const fake = fakeFactory((sock) => sock.open());
      const engine = new BaileysEngine({
        locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'host-a:1', heartbeatMs: 20 }),
        logger: silentLogger(),
        socketFactory: fake.factory,
      });
      const rc = recordingContext(fixture, instanceId);
      await storePairedCreds(rc.context.auth);
      return { fake, engine, rc };
    };
    /** Process `host-b:2` takes the lock of `instanceId` over, as after the holder's lock expired. */
    const takeOver = async (instanceId: string) => {
      await fixture.test.store.db
        .updateTable('instance_locks')
        .set({ owner: 'host-b:2' })
        .where('instance_id', '=', instanceId)
        .execute();
    };

    it('lets one process hold an instance; a second is refused until the first releases', async () => {
      const a = lock(0, 'proc-a');
      const b = lock(0, 'proc-b');
      assert.deepEqual(await a.acquire(), { acquired: true });
      assert.deepEqual(await a.acquire(), { acquired: true }, 'idempotent for the holder');
      const refused = await b.acquire();
      assert.equal(refused.acquired, false);
      assert.equal(refused.acquired === false && refused.holder, 'proc-a');
      await a.release();
      assert.deepEqual(await b.acquire(), { acquired: true });
      await b.release();
    });

    it('takes over an expired lock; the old holder learns it lost the lock on renewal', async () => {
      let now = Date.parse('2030-01-01T00:00:00Z');
      const lostA: string[] = [];
      const a = lock(1, 'proc-a', () => now, 1_000, lostA);
      const b = lock(1, 'proc-b', () => now, 1_000);
      assert.equal((await a.acquire()).acquired, true);
      now += 500;
      assert.equal(await a.renew(), true);
      now += 900;
      assert.equal((await b.acquire()).acquired, false, 'renewed, so still alive');
      now += 200;
      assert.equal((await b.acquire()).acquired, true, 'expired: taken over');
      assert.equal(await a.renew(), false);
      assert.deepEqual(lostA, ['another parley process took over this instance']);
      await a.release();
      const row = await fixture.test.store.db.selectFrom('instance_locks').selectAll().executeTakeFirst();
      assert.equal(row?.owner, 'proc-b', "a loser's release does not delete the winner's row");
      await b.release();
    });

    it('grants exactly one of many concurrent acquisitions', async () => {
      const contenders = Array.from({ length: 8 }, (_, i) => lock(2, `proc-${i}`));
      const results = await Promise.all(contenders.map((c) => c.acquire()));
      assert.equal(results.filter((r) => r.acquired).length, 1);
      await Promise.all(contenders.map((c) => c.release()));
    });

    it('refuses a second engine process on the same credentials (409), until the first stops', async () => {
      const instanceId = fixture.instanceIds[3] ?? '';
      const first = fakeFactory((sock) => sock.open());
      const second = fakeFactory((sock) => sock.open());
      const engineA = new BaileysEngine({
        locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'host-a:1' }),
        logger: silentLogger(),
        socketFactory: first.factory,
      });
      const engineB = new BaileysEngine({
        locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'host-b:2' }),
        logger: silentLogger(),
        socketFactory: second.factory,
      });
      const rcA = recordingContext(fixture, instanceId);
      const rcB = recordingContext(fixture, instanceId);
      await storePairedCreds(rcA.context.auth);
      const a = engineA.createSession(rcA.context);
      const b = engineB.createSession(rcB.context);
      await a.connect();
      await assert.rejects(b.connect(), (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.equal(statusOf(error.code), 409);
        assert.match(error.message, /another parley process \(host-a:1\)/);
        return true;
      });
      assert.equal(second.sockets.length, 0, 'the second process never opened a socket');
      first.sockets[0]?.close(440);
      await until(() => /replaced \(440\)/.test(a.state().reason ?? ''), 2_000, 'A stops');
      await untilAsync(
        async () =>
          (
            await fixture.test.store.db
              .selectFrom('instance_locks')
              .selectAll()
              .where('instance_id', '=', instanceId)
              .execute()
          ).length === 0,
        'A releases the lock',
      );
      await b.connect();
      assert.equal(b.state().connected, true);
      assert.equal(first.sockets.length, 1, 'A did not reconnect (no ping-pong)');
      await engineA.close();
      await engineB.close();
    });

    it('closes the socket when another process takes the lock over', async () => {
      const instanceId = fixture.instanceIds[4] ?? '';
      const { fake, engine, rc } = await pairedEngine(instanceId);
      const session = engine.createSession(rc.context);
      await session.connect();
      await takeOver(instanceId);
      await until(() => session.state().connected === false, 2_000, 'lock loss noticed');
      assert.equal(session.state().reason, 'another parley process took over this instance');
      assert.equal(fake.sockets[0]?.ended, 1);
      await engine.close();
    });

    it('a lock lost while the credentials load emits a state that keeps the account logged in', async () => {
      const instanceId = fixture.instanceIds[6] ?? '';
      const { engine, rc } = await pairedEngine(instanceId);
      // The first read of the stored credentials (the load after the lock was taken) waits until released, as on a
      // store that stopped answering; later reads pass.
      const store = rc.context.auth;
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let reads = 0;
      const get = store.get.bind(store);
      store.get = async (...args: Parameters<typeof store.get>) => {
        reads += 1;
        if (reads === 1) await held;
        return get(...args);
      };
      const session = engine.createSession(rc.context);
      const connecting = session.connect().catch(() => undefined);
      await until(() => reads === 1, 2_000, 'the credentials load');
      await takeOver(instanceId);
      await until(
        () => rc.events.some((event) => event.type === 'connection'),
        2_000,
        'the lock loss emitted',
      );
      const states = rc.events.flatMap((event) => (event.type === 'connection' ? [event.state] : []));
      assert.deepEqual(
        states.map((state) => state.loggedIn),
        [true],
        'never "not logged in": that reads as a logout, which cancels the pending sends',
      );
      release();
      await connecting;
      await engine.close();
    });

    /**
     * An engine of process `host-a:1` on fake sockets whose peer answers no close frame (`frozen`), with a lock that
     * notes, at each release, whether the WebSocket of the last socket was still open.
     */
    const frozenEngine = async (instanceId: string) => {
      const fake = fakeFactory((sock) => {
        sock.frozen = true;
        sock.open();
      });
      const sql = new SqlSessionLocks({ db: fixture.test.store.db, owner: 'host-a:1' });
      const openAtRelease: boolean[] = [];
      const locks: SessionLocks = {
        forInstance: (id, hooks) => {
          const lock = sql.forInstance(id, hooks);
          return {
            get held() {
              return lock.held;
            },
            acquire: () => lock.acquire(),
            release: () => {
              openAtRelease.push(fake.sockets.at(-1)?.ws.socket.readyState !== 3);
              return lock.release();
            },
          };
        },
      };
      const engine = new BaileysEngine({ locks, logger: silentLogger(), socketFactory: fake.factory });
      const rc = recordingContext(fixture, instanceId);
      await storePairedCreds(rc.context.auth);
      const session = engine.createSession(rc.context);
      await session.connect();
      const sock: FakeSocket | undefined = fake.sockets[0];
      assert.ok(sock);
      return { engine, session, sock, openAtRelease };
    };

    it('a disconnect of a frozen connection destroys its socket within the close bound, then gives the lock up', async () => {
      const { engine, session, sock, openAtRelease } = await frozenEngine(fixture.instanceIds[7] ?? '');
      const t0 = Date.now();
      await session.disconnect();
      const took = Date.now() - t0;
      assert.equal(sock.ended, 1, "Baileys' end sent its close frame");
      assert.equal(sock.terminated, 1, 'unanswered, the socket is destroyed');
      assert.deepEqual(openAtRelease, [false], 'the lock is given up only once the socket is closed');
      assert.ok(took >= CLOSE_HANDSHAKE_MS - 50 && took < CLOSE_HANDSHAKE_MS + 1_500, `took ${took} ms`);
      await engine.close();
    });

    it('a fenced close of a frozen connection destroys its socket at once, then gives the lock up', async () => {
      const { engine, session, sock, openAtRelease } = await frozenEngine(fixture.instanceIds[8] ?? '');
      const t0 = Date.now();
      await session.close({ fenced: true });
      const took = Date.now() - t0;
      assert.equal(sock.terminated, 1, 'destroyed with no closing handshake');
      assert.deepEqual(openAtRelease, [false], 'the lock is given up only once the socket is closed');
      assert.ok(took < CLOSE_HANDSHAKE_MS, `not waiting for a close frame: took ${took} ms`);
      await engine.close();
    });

    it('renews the lock on a heartbeat while connected and releases it on disconnect', async () => {
      const instanceId = fixture.instanceIds[5] ?? '';
      const fake = fakeFactory((sock) => sock.open());
      const engine = new BaileysEngine({
        locks: new SqlSessionLocks({
          db: fixture.test.store.db,
          owner: 'host-a:1',
          heartbeatMs: 20,
          ttlMs: 60_000,
        }),
        logger: silentLogger(),
        socketFactory: fake.factory,
      });
      const rc = recordingContext(fixture, instanceId);
      await storePairedCreds(rc.context.auth);
      const session = engine.createSession(rc.context);
      await session.connect();
      const read = async () =>
        (
          await fixture.test.store.db
            .selectFrom('instance_locks')
            .selectAll()
            .where('instance_id', '=', instanceId)
            .executeTakeFirst()
        )?.expires_at;
      const firstExpiry = await read();
      assert.ok(firstExpiry, 'the lock is held once connected');
      await eventually('the heartbeat renews the lock', async () => {
        const laterExpiry = await read();
        return laterExpiry !== undefined && laterExpiry > firstExpiry;
      });
      await session.disconnect();
      assert.equal(await read(), undefined);
      assert.deepEqual(
        { connected: session.state().connected, loggedIn: session.state().loggedIn },
        { connected: false, loggedIn: true },
        'docs/decisions/0016-session-lifecycle.md: after disconnect',
      );
      await engine.close();
    });
  });
}
