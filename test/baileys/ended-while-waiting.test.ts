import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { WAVersion } from 'baileys';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { isDomainError } from './fake-sessions.ts';
import { type FakeSocket, fakeFactory, storePairedCreds } from './fake-socket.ts';
import { type LiveFixture, liveFixture, recordingContext, silentLogger, until } from './support.ts';

/** The platform version the refreshes below answer with. */
const FRESH: WAVersion = [2, 3000, 4242];

/** A promise and its resolve, for a version fetch the test lets finish when it chooses. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Runs every promise callback queued so far, and the ones those queue (a macrotask comes after them all). */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A live session whose connection is ended (a disconnect, a close at shutdown or hand-over, a lost lock) while it
 * waits to reconnect (docs/decisions/0025-live-engine.md, docs/decisions/0016-session-lifecycle.md): the version
 * refresh after a 405 (up to 5 s against the platform's site), or the quiescing of a close. What it waited for
 * opens no socket once it ends: the one-socket lock is released by then, and another process may hold it.
 */
describe('a connection ended while the live engine waits to reconnect opens nothing', () => {
  let fixture: LiveFixture;
  let next = 0;
  before(async () => {
    fixture = await liveFixture('sqlite', 8);
  });
  after(async () => {
    await fixture.test.cleanup();
  });

  /**
   * A session of process `host-a:1` on the next instance (paired credentials stored), over fake sockets that do
   * `open` when created, whose version fetches wait until the test resolves them (`fetches`, in order).
   */
  async function session(open: (sock: FakeSocket, i: number) => void = (sock) => sock.open()) {
    const instanceId = fixture.instanceIds[next++] ?? '';
    const fetches: ReturnType<typeof deferred<WAVersion>>[] = [];
    const fake = fakeFactory(open);
    const engine = new BaileysEngine({
      locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'host-a:1', heartbeatMs: 20 }),
      logger: silentLogger(),
      socketFactory: fake.factory,
      random: () => 0.5,
      fetchVersion: () => {
        const fetch = deferred<WAVersion>();
        fetches.push(fetch);
        return fetch.promise;
      },
    });
    const rc = recordingContext(fixture, instanceId);
    await storePairedCreds(rc.context.auth);
    return { instanceId, fake, engine, fetches, session: engine.createSession(rc.context) };
  }

  const lockRows = (instanceId: string) =>
    fixture.test.store.db
      .selectFrom('instance_locks')
      .select('owner')
      .where('instance_id', '=', instanceId)
      .execute();

  /** Process `host-b:2` takes the instance's lock over (as after the holder's lock expired). */
  const takeOver = (instanceId: string) =>
    fixture.test.store.db
      .updateTable('instance_locks')
      .set({ owner: 'host-b:2' })
      .where('instance_id', '=', instanceId)
      .execute();

  const endings: [string, (s: EngineSession, instanceId: string) => Promise<void>, string[]][] = [
    ['a disconnect', (s) => s.disconnect(), []],
    ['a close (shutdown, hand-over)', (s) => s.close(), []],
    [
      'a lost lock',
      async (s, instanceId) => {
        await takeOver(instanceId);
        await until(() => /took over/.test(s.state().reason ?? ''), 2_000, 'the lock loss noticed');
      },
      ['host-b:2'],
    ],
  ];
  for (const [what, end, owners] of endings) {
    it(`${what} during the version refresh after a 405 stays ended`, async (t: TestContext) => {
      const { instanceId, fake, engine, fetches, session: s } = await session();
      await s.connect();
      fake.sockets[0]?.close(405, 'Connection Failure');
      await until(() => fetches.length === 1, 2_000, 'the version refresh');
      await end(s, instanceId);
      // A reconnect after a refresh waits 0 ms: due at the first tick once the refresh ended.
      t.mock.timers.enable({ apis: ['setTimeout'] });
      fetches[0]?.resolve(FRESH);
      await fetches[0]?.promise;
      await settled();
      t.mock.timers.tick(0);
      t.mock.timers.reset();
      assert.equal(fake.sockets.length, 1, 'no socket opened after the connection ended');
      assert.equal(s.state().connected, false);
      assert.deepEqual(
        (await lockRows(instanceId)).map((row) => row.owner),
        owners,
        'the lock is not held without a socket',
      );
      await engine.close();
    });
  }

  it('a disconnect and a new connect during the refresh of a first connect open one socket, the new one', async () => {
    const {
      fake,
      engine,
      fetches,
      session: s,
    } = await session((sock, i) => {
      if (i === 0) sock.close(405, 'Connection Failure');
    });
    const first = s.connect();
    await until(() => fetches.length === 1, 2_000, 'the version refresh');
    await s.disconnect();
    await assert.rejects(first, isDomainError('conflict', /cancelled by a disconnect/));
    const again = s.connect();
    await until(() => fake.sockets.length === 2, 2_000, "the new connect's socket");
    fetches[0]?.resolve(FRESH);
    await fetches[0]?.promise;
    await settled();
    assert.equal(fake.sockets.length, 2, "the first connect's refresh opened nothing");
    assert.equal(fake.sockets[1]?.ended, 0, "the new connect's socket is left alone");
    fake.sockets[1]?.open();
    await again;
    assert.equal(s.state().connected, true);
    await engine.close();
  });

  it('a close the platform sends while a graceful close quiesces the socket reconnects nothing', async (t: TestContext) => {
    const { fake, engine, session: s } = await session();
    await s.connect();
    const sock = fake.sockets[0];
    assert.ok(sock);
    // A stanza is being handled: the close waits for it (quiesce.ts).
    const handled = deferred<void>();
    let asked = false;
    Object.assign(sock, {
      messageMutex: {
        mutex: <T>(task: () => Promise<T>) => {
          asked = true;
          return handled.promise.then(task);
        },
      },
    });
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const closing = s.close();
    await until(() => asked, 2_000, 'the quiescing');
    // The platform restarts the stream meanwhile: a first 515 would reconnect at once.
    sock.close(515, 'Stream Errored (restart required)');
    await settled();
    t.mock.timers.tick(0);
    assert.equal(fake.sockets.length, 1, 'no socket opened while closing');
    handled.resolve();
    await closing;
    t.mock.timers.reset();
    assert.equal(s.state().connected, false);
    assert.equal(sock.ended > 0, true);
    await engine.close();
  });
});
