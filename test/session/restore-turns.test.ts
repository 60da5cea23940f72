import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { until } from '../baileys/support.ts';
import { createTestApp, loginSandbox } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * A reconnect nobody asked for never undoes a disconnect or a logout (docs/decisions/0016-session-lifecycle.md,
 * docs/decisions/0008-leases-and-fencing.md): a node's lease tick or a request being routed may hold an instance read
 * before the user disconnected it; the session manager restores only what the store wants connected when the
 * restore's turn comes, and a restore and a disconnect of one instance never interleave.
 */
for (const dialect of testDialects()) {
  describe(`restoring a session after a disconnect [${dialect}]`, () => {
    it('a restore holding the instance as it was before a disconnect leaves it disconnected', async () => {
      const t = await createTestApp({ dialect });
      try {
        await loginSandbox(t, '5511999990301');
        const stale = await t.services.sessions.reload(t.instance.id);
        assert.equal(stale.desiredState, 'connected');

        const disconnect = await t.call('POST', '/v1/session/disconnect');
        assert.equal(disconnect.status, 200);
        // The lease keeper's path: the instance as its tick read it, the session here no longer connected.
        const keeper = new LeaseKeeper({
          db: t.services.store.db,
          nodeId: 'node-restore-turns',
          sessions: t.services.sessions,
          logger: pino({ level: 'silent' }),
          heartbeatMs: 60_000,
        });
        await keeper.ensureRestored(stale);
        assert.equal(await t.services.sessions.restore(t.instance.id), false);
        // A boot restore's list read before the disconnect committed is not trusted either.
        const stops = t.services.sessions.stops - 1;
        assert.equal(await t.services.sessions.restore(t.instance.id, { instance: stale, stops }), false);

        const status = await t.call('GET', '/v1/session/status');
        assert.deepEqual(
          [status.body.data.connected, status.body.data.loggedIn],
          [false, true],
          'still disconnected, still logged in',
        );
        const row = await t.services.store.db
          .selectFrom('instances')
          .select('desired_state')
          .where('id', '=', t.instance.id)
          .executeTakeFirstOrThrow();
        assert.equal(row.desired_state, 'disconnected');
      } finally {
        await t.close();
      }
    });

    it('a restore and a disconnect started together end disconnected in either order', async () => {
      const t = await createTestApp({ dialect });
      try {
        await loginSandbox(t, '5511999990302');
        const { sessions } = t.services;
        const instance = await sessions.reload(t.instance.id);
        await sessions.disconnect(instance);
        // The instance wanted connected again, then a restore and a disconnect at once, restore first.
        await t.call('POST', '/v1/session/connect');
        const restoredFirst = sessions.restore(instance.id);
        const disconnectedSecond = sessions.disconnect(instance);
        assert.deepEqual(await Promise.all([restoredFirst, disconnectedSecond]), [true, undefined]);
        assert.equal(sessions.status(instance).connected, false, 'restore first, disconnect second');

        // Disconnect first: the restore behind it reads the instance after it and does nothing.
        await t.call('POST', '/v1/session/connect');
        const disconnectedFirst = sessions.disconnect(instance);
        const restoredSecond = sessions.restore(instance.id);
        assert.deepEqual(await Promise.all([disconnectedFirst, restoredSecond]), [undefined, false]);
        assert.equal(sessions.status(instance).connected, false, 'disconnect first, restore second');
        assert.equal(sessions.status(instance).loggedIn, true);
      } finally {
        await t.close();
      }
    });

    it('a disconnect does not wait for a restore whose platform does not answer', async () => {
      const t = await createTestApp({ dialect });
      try {
        await loginSandbox(t, '5511999990303');
        const { sessions } = t.services;
        const instance = await sessions.reload(t.instance.id);
        // Not connected, and wanted connected: as after a dropped connection.
        await sessions.disconnect(instance);
        await t.services.store.db
          .updateTable('instances')
          .set({ desired_state: 'connected' })
          .where('id', '=', instance.id)
          .execute();
        // The session's connect starts and then waits, as one does for a platform that does not answer, until
        // released.
        const session = sessions.existing(instance.id);
        assert.ok(session);
        const connect = session.connect.bind(session);
        let answer: () => void = () => undefined;
        const answered = new Promise<void>((resolve) => {
          answer = resolve;
        });
        let asked = false;
        session.connect = async () => {
          asked = true;
          const started = connect();
          await answered;
          return started;
        };
        try {
          const restoring = sessions.restore(instance.id);
          await until(() => asked, 5_000, 'the restore starting the connection');
          // Resolves while the restore's connection still waits for the platform.
          await sessions.disconnect(instance);
          assert.equal(sessions.status(instance).connected, false);
          answer();
          assert.equal(await restoring, true);
          assert.equal(sessions.status(instance).connected, false, 'the disconnect ended the attempt');
        } finally {
          answer();
          session.connect = connect;
        }
      } finally {
        await t.close();
      }
    });
  });
}
