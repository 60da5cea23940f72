import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { SessionReleasedError } from '../../src/domain/errors.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import type { AuthStateStore, Engine } from '../../src/engines/engine.ts';
import { RetryingAuthStateStore } from '../../src/sessions/auth-retry.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { SessionManager } from '../../src/sessions/manager.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { fakeFactory, ME, storePairedCreds } from '../baileys/fake-socket.ts';
import { liveFixture } from '../baileys/support.ts';
import { testDialects } from '../support/store.ts';

/**
 * Releasing a session whose connect or close is still under way (docs/decisions/0008-leases-and-fencing.md): the
 * lease keeper fences an instance (its lease lost or about to expire) while the session's restore still loads the
 * credentials; the session manager forgets the session at once, so no socket may open for it afterwards (it would
 * hold no lock, and no later fence would find it); nor may a credential read that answers after the release hand
 * anything to it.
 */

const silent = pino({ level: 'silent' });

/** A gate a test opens: `wait()` resolves once `open()` ran. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait: () => opened, open };
}

describe('a credential read that answers after its session was released', () => {
  it('hands nothing to the session: it raises the released error', async () => {
    const answer = gate();
    const reading = gate();
    const inner: AuthStateStore = {
      get: async () => {
        reading.open();
        await answer.wait();
        return new Map([['creds', 'stored']]);
      },
      set: async () => undefined,
      list: async () => new Map(),
      clear: async () => undefined,
    };
    const released = new AbortController();
    const policy = { baseDelayMs: 1, maxDelayMs: 2, unknownAttempts: 1, random: () => 0.5 };
    const store = new RetryingAuthStateStore(
      inner,
      policy,
      silent,
      new AbortController().signal,
      released.signal,
    );
    const read = store.get('creds', ['creds']).then(
      (values) => values,
      (error: unknown) => error,
    );
    await reading.wait();
    released.abort();
    answer.open();
    assert.ok((await read) instanceof SessionReleasedError, 'the read answered the released session');
  });
});

for (const dialect of testDialects()) {
  describe(`releasing a session whose connect is under way (${dialect})`, () => {
    it('a fenced release while the restore loads the credentials: no socket, no session, no lock', async () => {
      const fixture = await liveFixture(dialect, 1);
      const db = fixture.test.store.db;
      const instanceId = fixture.instanceIds[0] ?? '';
      await db
        .updateTable('instances')
        .set({ jid: ME.id, desired_state: 'connected' })
        .where('id', '=', instanceId)
        .execute();
      await storePairedCreds(new SqlAuthStateStore(db, fixture.box, instanceId));
      const fake = fakeFactory((sock) => sock.open());
      const baileys = new BaileysEngine({
        locks: new SqlSessionLocks({ db, owner: 'node-a' }),
        logger: silent,
        socketFactory: fake.factory,
      });
      const reading = gate();
      const answer = gate();
      // The credential read of the connect answers slowly (a busy store); the read itself succeeds.
      const engine: Engine = {
        name: 'baileys',
        createSession: (context) => {
          const inner = context.auth;
          const slow: AuthStateStore = {
            get: async (category, ids) => {
              const result = await inner.get(category, ids);
              reading.open();
              await answer.wait();
              return result;
            },
            set: (entries) => inner.set(entries),
            list: (category) => inner.list(category),
            clear: () => inner.clear(),
          };
          return baileys.createSession({ ...context, auth: slow });
        },
      };
      const sessions = new SessionManager({
        db,
        box: fixture.box,
        engines: { test: engine, live: engine },
        recorder: { record: async () => undefined, drain: async () => undefined } as never,
        findMessage: async () => undefined,
        logger: silent,
        clock: Date.now,
      });
      try {
        const restoring = sessions.restore(instanceId).then(
          (restored) => restored,
          (error: unknown) => error,
        );
        await reading.wait();
        await sessions.release(instanceId, { fenced: true });
        answer.open();
        const outcome = await restoring;
        assert.ok(outcome instanceof SessionReleasedError, `the restore ended with ${String(outcome)}`);
        await sleep(50);
        assert.deepEqual(sessions.ids(), []);
        assert.equal(fake.sockets.length, 0, 'a socket was opened for the released session');
        const lock = await db
          .selectFrom('instance_locks')
          .select('owner')
          .where('instance_id', '=', instanceId)
          .executeTakeFirst();
        assert.equal(lock, undefined);
      } finally {
        await sessions.closeAll();
        await baileys.close();
        await fixture.test.cleanup();
      }
    });
  });
}
