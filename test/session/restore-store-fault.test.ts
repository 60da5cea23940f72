/**
 * A boot restore on one node whose store does not answer the list of instances to restore
 * (docs/decisions/0016-session-lifecycle.md, docs/decisions/0011-store-faults.md): the list is read again with
 * backoff until the store answers, the boot goes on (nothing thrown), the instances answer `503 not connected to the
 * platform right now` with `Retry-After` meanwhile, and once the store answers they reconnect by themselves. An
 * instance a user disconnected meanwhile is not reconnected. Before, the failed read threw out of `restoreAll`, and
 * the server's start with it. SQLite, and PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { updateInstance } from '../../src/store/instances.ts';
import { createTestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { FakeEngine } from '../support/fake-engine.ts';
import { createTestStore, storeOutage, testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`restoring sessions when the store does not answer their list (${dialect})`, () => {
    it('reads the list again until the store answers; 503 with Retry-After meanwhile', async () => {
      let down = false;
      /** Reads of the list of instances to restore the store refused. */
      let refused = 0;
      const testStore = await createTestStore(dialect, {
        faults: (text) => {
          if (!down || !/"desired_state" = .*"jid" is not null/.test(text)) return;
          refused += 1;
          throw storeOutage(dialect);
        },
      });
      const engine = new FakeEngine();
      const t = await createTestApp({
        testStore,
        liveEngine: engine,
        restoreRetry: { baseMs: 20, maxMs: 100 },
      });
      try {
        const db = testStore.store.db;
        const restored = await t.newInstance('live', 'restored');
        const stopped = await t.newInstance('live', 'stopped');
        for (const instance of [restored, stopped])
          await updateInstance(db, instance.id, {
            desiredState: 'connected',
            jid: '5511999990999:3@s.whatsapp.net',
          });
        const headers = { authorization: `Bearer ${await t.newKey({ env: 'live' })}` };
        const send = () =>
          t.call(
            'POST',
            `/v1/messages/send?from=${restored.id}`,
            { phone: '5511988887777', body: 'hi' },
            headers,
          );

        down = true;
        assert.equal(
          await t.services.sessions.restoreAll(),
          0,
          'the boot goes on while the list is not read',
        );
        assert.equal(refused, 1);
        const waiting = await send();
        assert.deepEqual(
          [waiting.status, waiting.headers['retry-after'], waiting.body],
          [503, '2', { error: { code: 503, message: 'not connected to the platform right now' } }],
        );
        await eventually('the list read again while the store fails', () => refused >= 3);
        assert.equal(engine.behaviour.connects, 0);
        // A user's disconnect while the list waits: the read that succeeds leaves the instance alone.
        const disconnect = await t.call('POST', `/v1/session/disconnect?from=${stopped.id}`, {}, headers);
        assert.equal(disconnect.status, 200, JSON.stringify(disconnect.body));
        down = false;
        await eventually(
          'the instance restored by itself',
          () => t.services.sessions.existing(restored.id)?.state().connected === true,
        );
        assert.equal(engine.behaviour.connects, 1, 'the disconnected instance was not connected');
        assert.equal(t.services.sessions.existing(stopped.id)?.state().connected, false);
        const sessions = t.services.sessions;
        assert.equal(sessions.ready(await sessions.reload(restored.id)), sessions.existing(restored.id));
      } finally {
        down = false;
        await t.close();
        await testStore.cleanup();
      }
    });
  });
}
