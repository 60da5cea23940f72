import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import type { Engine } from '../../src/engines/engine.ts';
import { SessionManager } from '../../src/sessions/manager.ts';
import { getInstance } from '../../src/store/instances.ts';
import { liveFixture } from '../baileys/support.ts';
import { FakeEngine } from '../support/fake-engine.ts';
import { testDialects } from '../support/store.ts';

/**
 * The close of a released session outlasts its release (docs/decisions/0008-leases-and-fencing.md): a live session
 * records the events its socket received before its close ends, which can take seconds, and the lease keeper does
 * not wait for it in its rounds. The session manager forgets the session at once, makes a new session of the
 * instance only once that close ended (the old one may still hold the one-socket lock, or record events that come
 * before the new one's), and waits for it at shutdown. A restore the lease keeper asks for connects only while the
 * keeper allows it, asked right before the session connects (its fence still armed).
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

for (const dialect of testDialects()) {
  describe(`a released session still closing (${dialect})`, () => {
    it('a new session of the instance is made once its released one closed, and a shutdown waits for it', async () => {
      const fixture = await liveFixture(dialect, 1);
      const db = fixture.test.store.db;
      const instanceId = fixture.instanceIds[0] ?? '';
      const instance = await getInstance(db, instanceId);
      assert.ok(instance);
      const closes: ReturnType<typeof gate>[] = [];
      const log: string[] = [];
      const fakeEngine = new FakeEngine();
      // Each session's close lasts until the test lets it end (its received events still being recorded).
      const engine: Engine = {
        name: 'baileys',
        createSession: (context) => {
          const session = fakeEngine.createSession(context);
          const closed = gate();
          closes.push(closed);
          const made = closes.length;
          log.push(`made ${made}`);
          return {
            ...session,
            close: async () => {
              await closed.wait();
              log.push(`closed ${made}`);
            },
          };
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
        await sessions.session(instance);
        const releasing = sessions.release(instanceId, { fenced: true });
        assert.deepEqual(sessions.ids(), [], 'forgotten at once');
        const again = sessions.session(instance);
        await sleep(50);
        assert.deepEqual(log, ['made 1'], 'a new session was made while the released one still closed');
        closes[0]?.open();
        await releasing;
        await again;
        assert.deepEqual(log, ['made 1', 'closed 1', 'made 2']);

        // Released again: a shutdown waits for that close too.
        const second = sessions.release(instanceId, { fenced: true });
        let shutDown = false;
        const shutdown = sessions.closeAll().then(() => {
          shutDown = true;
        });
        await sleep(50);
        assert.equal(shutDown, false, 'the shutdown did not wait for the close of a released session');
        closes[1]?.open();
        await second;
        await shutdown;
        assert.deepEqual(log, ['made 1', 'closed 1', 'made 2', 'closed 2']);
      } finally {
        for (const closed of closes) closed.open();
        await sessions.closeAll();
        await fixture.test.cleanup();
      }
    });

    it('a restore the lease keeper no longer allows (its fence fired meanwhile) connects nothing', async () => {
      const fixture = await liveFixture(dialect, 1);
      const db = fixture.test.store.db;
      const instanceId = fixture.instanceIds[0] ?? '';
      await db
        .updateTable('instances')
        .set({ jid: '5511999990999:3@s.whatsapp.net', desired_state: 'connected' })
        .where('id', '=', instanceId)
        .execute();
      const engine = new FakeEngine();
      const sessions = new SessionManager({
        db,
        box: fixture.box,
        engines: { test: engine, live: engine },
        recorder: {
          record: async () => undefined,
          recordWith: async () => undefined,
          drain: async () => undefined,
        } as never,
        findMessage: async () => undefined,
        logger: silent,
        clock: Date.now,
      });
      try {
        // Asked before the session is made (allowed), and again once it is kept (the fence fired meanwhile).
        const answers = [true, false];
        const asked: boolean[] = [];
        const allowed = () => {
          const answer = answers.shift() ?? false;
          asked.push(answer);
          return answer;
        };
        assert.equal(await sessions.restore(instanceId, undefined, allowed), false);
        assert.deepEqual(asked, [true, false]);
        assert.equal(engine.behaviour.connects, 0, 'the session was asked to connect');
        assert.equal(await sessions.restore(instanceId, undefined, () => true), true);
        assert.equal(engine.behaviour.connects, 1);
      } finally {
        await sessions.closeAll();
        await fixture.test.cleanup();
      }
    });
  });
}
