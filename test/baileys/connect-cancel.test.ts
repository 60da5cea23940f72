import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DomainError, SessionReleasedError } from '../../src/domain/errors.ts';
import { readPairedCreds } from '../../src/engines/baileys/auth-state.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import type { AuthStateStore, EngineSession, SessionLocks } from '../../src/engines/engine.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { testDialects } from '../support/store.ts';
import { fakeFactory, storePairedCreds } from './fake-socket.ts';
import { type LiveFixture, liveFixture, recordingContext, silentLogger, until } from './support.ts';

/**
 * A live session's connect cancelled while it still waits on the store (docs/decisions/0025-live-engine.md,
 * docs/decisions/0008-leases-and-fencing.md): a close (the session released: its lease lost or handed over, the
 * instance deleted), a disconnect or a logout that lands while the connect loads the credentials, or while it takes
 * the one-socket lock, ends the attempt. No socket is opened (it would hold no lock, and no fence would reach it once
 * the session manager forgot the session; after a logout it would open on the deleted credentials), the lock is not
 * left held, and the connect rejects with what cancelled it.
 */

/** A gate a test opens: `wait()` resolves once `open()` ran. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait: () => opened, open };
}

for (const dialect of testDialects()) {
  describe(`a live connect cancelled while it waits on the store (${dialect})`, () => {
    let fixture: LiveFixture;
    before(async () => {
      fixture = await liveFixture(dialect, 9);
    });
    after(async () => {
      await fixture.test.cleanup();
    });

    const lockRow = (instanceId: string) =>
      fixture.test.store.db
        .selectFrom('instance_locks')
        .select('owner')
        .where('instance_id', '=', instanceId)
        .executeTakeFirst();

    /**
     * A session of instance `n` with paired credentials stored, whose first credential read answers only once the
     * returned gate opens (a busy store), over `locks` (default: the store's, as node-a).
     */
    const slowRead = async (n: number, locks?: SessionLocks) => {
      const instanceId = fixture.instanceIds[n] ?? '';
      const fake = fakeFactory((sock) => sock.open());
      const engine = new BaileysEngine({
        locks: locks ?? new SqlSessionLocks({ db: fixture.test.store.db, owner: 'node-a' }),
        logger: silentLogger(),
        socketFactory: fake.factory,
      });
      const rc = recordingContext(fixture, instanceId);
      await storePairedCreds(rc.context.auth);
      const inner = rc.context.auth;
      const reading = gate();
      const answer = gate();
      let held = true;
      const slow: AuthStateStore = {
        get: async (category, ids) => {
          const result = await inner.get(category, ids);
          if (held) {
            held = false;
            reading.open();
            await answer.wait();
          }
          return result;
        },
        set: (entries) => inner.set(entries),
        list: (category) => inner.list(category),
        clear: () => inner.clear(),
      };
      const session = engine.createSession({ ...rc.context, auth: slow });
      return { instanceId, fake, engine, session, inner, reading, answer };
    };

    const cases: {
      name: string;
      stop: (session: EngineSession) => Promise<void>;
      error: (error: unknown) => boolean;
    }[] = [
      {
        name: 'a fenced close',
        stop: (session) => session.close({ fenced: true }),
        error: (error) => error instanceof SessionReleasedError,
      },
      {
        name: 'a graceful close',
        stop: (session) => session.close(),
        error: (error) => error instanceof SessionReleasedError,
      },
      {
        name: 'a disconnect',
        stop: (session) => session.disconnect(),
        error: (error) => error instanceof DomainError && error.code === 'conflict',
      },
      {
        name: 'a logout',
        stop: (session) => session.logout(),
        error: (error) => error instanceof DomainError && error.code === 'conflict',
      },
    ];
    for (const [n, { name, stop, error }] of cases.entries()) {
      it(`${name} while the credentials load: no socket, no lock held, the connect rejects`, async () => {
        const { instanceId, fake, engine, session, inner, reading, answer } = await slowRead(n);
        try {
          const connecting = session.connect().then(
            () => 'connected',
            (failure: unknown) => failure,
          );
          await reading.wait();
          assert.equal(
            (await lockRow(instanceId))?.owner,
            'node-a',
            'the connect holds the lock while it reads',
          );
          await stop(session);
          answer.open();
          const outcome = await connecting;
          assert.ok(error(outcome), `the connect ended with ${String(outcome)}`);
          await sleep(50);
          assert.equal(fake.sockets.length, 0, 'a socket was opened after the connect was cancelled');
          assert.equal(await lockRow(instanceId), undefined, 'the lock is left held');
          assert.equal(session.state().connected, false);
          if (name === 'a logout') {
            assert.equal(await readPairedCreds(inner), null, 'the credentials stay deleted');
            assert.equal(session.state().loggedIn, false);
          }
        } finally {
          await session.close({ fenced: true });
          await engine.close();
        }
      });
    }

    // Two teardowns while the connect waits: it was cancelled by the first, and rejects with that one's error, not
    // the last one's (before, a connect a disconnect cancelled answered a logout's reason, or the 503 of a release
    // that told its client to retry a connect the user had cancelled).
    const twice: {
      name: string;
      stops: ((session: EngineSession) => Promise<void>)[];
      error: (error: unknown) => boolean;
    }[] = [
      {
        name: 'a disconnect, then a logout',
        stops: [(session) => session.disconnect(), (session) => session.logout()],
        error: (error) => error instanceof DomainError && /cancelled by a disconnect/.test(error.message),
      },
      {
        name: 'a disconnect, then a close',
        stops: [(session) => session.disconnect(), (session) => session.close()],
        error: (error) =>
          !(error instanceof SessionReleasedError) &&
          error instanceof DomainError &&
          error.code === 'conflict' &&
          /cancelled by a disconnect/.test(error.message),
      },
      {
        name: 'a logout, then a disconnect',
        stops: [(session) => session.logout(), (session) => session.disconnect()],
        error: (error) => error instanceof DomainError && /cancelled by a logout/.test(error.message),
      },
    ];
    for (const [k, { name, stops, error }] of twice.entries()) {
      it(`${name} while the credentials load: the connect rejects with what cancelled it first`, async () => {
        const { instanceId, fake, engine, session, reading, answer } = await slowRead(6 + k);
        try {
          const connecting = session.connect().then(
            () => 'connected',
            (failure: unknown) => failure,
          );
          await reading.wait();
          for (const stop of stops) await stop(session);
          answer.open();
          const outcome = await connecting;
          assert.ok(error(outcome), `the connect ended with ${String(outcome)}`);
          assert.equal(fake.sockets.length, 0, 'a socket was opened after the connect was cancelled');
          assert.equal(await lockRow(instanceId), undefined, 'the lock is left held');
        } finally {
          await session.close({ fenced: true });
          await engine.close();
        }
      });
    }

    it('a close while the lock is being taken: the lock taken after the close is given up, no socket', async () => {
      const instanceId = fixture.instanceIds[4] ?? '';
      const store = new SqlSessionLocks({ db: fixture.test.store.db, owner: 'node-a' });
      const taking = gate();
      const answer = gate();
      // The lock's statements answer only once the test lets them (a busy store): the close's release finds nothing
      // held yet, and the lock row is written after it.
      const locks: SessionLocks = {
        forInstance: (id, hooks) => {
          const lock = store.forInstance(id, hooks);
          return {
            get held() {
              return lock.held;
            },
            acquire: async () => {
              taking.open();
              await answer.wait();
              return lock.acquire();
            },
            release: () => lock.release(),
          };
        },
      };
      const { fake, engine, session } = await slowRead(4, locks);
      try {
        const connecting = session.connect().then(
          () => 'connected',
          (failure: unknown) => failure,
        );
        await taking.wait();
        await session.close({ fenced: true });
        answer.open();
        const outcome = await connecting;
        assert.ok(outcome instanceof SessionReleasedError, `the connect ended with ${String(outcome)}`);
        await sleep(50);
        assert.equal(fake.sockets.length, 0);
        assert.equal(await lockRow(instanceId), undefined, 'the lock taken after the close is still held');
      } finally {
        await engine.close();
      }
    });

    it('a connect made after a disconnect cancelled one still loading starts anew and opens one socket', async () => {
      const { instanceId, fake, engine, session, reading, answer } = await slowRead(5);
      try {
        const first = session.connect().then(
          () => 'connected',
          (failure: unknown) => failure,
        );
        await reading.wait();
        await session.disconnect();
        const second = session.connect();
        answer.open();
        const outcome = await first;
        assert.ok(outcome instanceof DomainError && outcome.code === 'conflict', `first: ${String(outcome)}`);
        await second;
        await until(() => session.state().connected, 2_000, 'connected');
        assert.equal(fake.sockets.length, 1);
        assert.equal((await lockRow(instanceId))?.owner, 'node-a');
      } finally {
        await session.close({ fenced: true });
        await engine.close();
      }
    });
  });
}
