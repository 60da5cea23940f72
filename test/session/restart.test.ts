import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTestApp, loginSandbox } from '../support/app.ts';
import { createTestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`restart (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0016-session-lifecycle.md) [${dialect}]`, () => {
    it('keeps orgs, keys, instances, subscriptions, HMAC keys and the sandbox login; reconnects without a scan', async () => {
      const testStore = await createTestStore(dialect);
      const first = await createTestApp({ testStore });
      const { clock, key, instance } = first;
      let firstOpen = true;
      try {
        await loginSandbox(first, '5511999990201');
        await first.call('POST', '/v1/session/connect', { subscribe: ['Message', 'ChatPresence'] });
        await first.call('POST', '/v1/session/hmac/config', { hmacKey: 'h'.repeat(40) });
        const idle = await first.newInstance('test', 'idle');
        await first.call('POST', `/v1/session/connect?from=${idle.id}`);
        await first.close();
        firstOpen = false;

        const second = await createTestApp({ dialect, testStore, clock });
        try {
          const restored = await second.services.sessions.restoreAll();
          assert.equal(restored, 1, 'only the logged-in, connected instance is restored');
          const headers = { authorization: `Bearer ${key}` };
          const status = await second.call(
            'GET',
            `/v1/session/status?from=${instance.id}`,
            undefined,
            headers,
          );
          assert.deepEqual(status.body.data, {
            connected: true,
            loggedIn: true,
            jid: '5511999990201.0:1@s.whatsapp.net',
            instanceId: instance.id,
            env: 'test',
          });
          const connect = await second.call('POST', `/v1/session/connect?from=${instance.id}`, {}, headers);
          assert.equal(connect.body.data.events, 'Message,ChatPresence', 'subscription kept');
          const hmac = await second.call(
            'GET',
            `/v1/session/hmac/config?from=${instance.id}`,
            undefined,
            headers,
          );
          assert.deepEqual(hmac.body.data, { configured: true });
          const idleStatus = await second.call(
            'GET',
            `/v1/session/status?from=${idle.id}`,
            undefined,
            headers,
          );
          assert.equal(idleStatus.body.data.connected, false, 'a pairing attempt does not survive a restart');
          assert.equal(
            (await second.call('GET', `/v1/session/qr?from=${instance.id}`, undefined, headers)).status,
            409,
          );
        } finally {
          await second.close();
        }
      } finally {
        if (firstOpen) await first.close();
        await testStore.cleanup();
      }
    });
  });
}
