import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { decodeQr } from '../support/qr.ts';
import { testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`session lifecycle on the sandbox (docs/api.md#session, docs/decisions/0016-session-lifecycle.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      // Three or more test instances: the pro plan (free allows 2, docs/decisions/0029-instances-over-the-api.md).
      t = await createTestApp({ dialect, plan: { plan: 'pro' } });
    });
    after(() => t.close());

    it('walks connect → QR → scan → disconnect → reconnect → logout with the status of docs/decisions/0016-session-lifecycle.md at each step', async () => {
      const status = async () => (await t.call('GET', '/v1/session/status')).body.data;
      assert.deepEqual(await status(), {
        connected: false,
        loggedIn: false,
        instanceId: t.instance.id,
        env: 'test',
      });

      const qrBefore = await t.call('GET', '/v1/session/qr');
      assert.deepEqual(qrBefore.body, { error: { code: 409, message: 'instance is not connected' } });

      const connect = await t.call('POST', '/v1/session/connect');
      assert.equal(connect.status, 200);
      assert.deepEqual(connect.body, {
        success: true,
        code: 200,
        data: {
          details: 'Connected!',
          events: 'Message,ReadReceipt,HistorySync,ChatPresence',
          jid: '',
          webhook: '',
        },
      });
      assert.deepEqual(await status(), {
        connected: true,
        loggedIn: false,
        instanceId: t.instance.id,
        env: 'test',
      });

      const qr = await t.call('GET', '/v1/session/qr');
      assert.equal(qr.status, 200);
      assert.equal(
        decodeQr(qr.body.data.qrCode),
        qr.body.data.code,
        'the PNG encodes the code returned beside it',
      );
      assert.match(qr.body.data.code, /^2@[A-Za-z0-9+/=]+,[A-Za-z0-9+/=]+,[A-Za-z0-9+/=]+,[A-Za-z0-9+/=]+$/);
      assert.equal(Date.parse(qr.body.data.expiresAt) - t.clock(), 60_000);

      const wrong = await t.call('POST', '/v1/sandbox/scan', { code: 'not-the-code' });
      assert.deepEqual(wrong.body, {
        error: { code: 400, message: 'code does not match the current QR code' },
      });

      const scan = await t.call('POST', '/v1/sandbox/scan', {
        code: qr.body.data.code,
        phone: '5511999990001',
      });
      assert.deepEqual(scan.body, {
        success: true,
        code: 200,
        data: { details: 'Logged in as 5511999990001' },
      });
      const jid = '5511999990001.0:1@s.whatsapp.net';
      assert.deepEqual(await status(), {
        connected: true,
        loggedIn: true,
        jid,
        instanceId: t.instance.id,
        env: 'test',
      });
      const row = await t.testStore.store.db
        .selectFrom('instances')
        .selectAll()
        .where('id', '=', t.instance.id)
        .executeTakeFirstOrThrow();
      assert.equal(row.phone, '5511999990001');
      assert.equal(row.jid, jid);
      assert.equal(row.last_connected_at, t.clock());

      assert.deepEqual((await t.call('GET', '/v1/session/qr')).body, {
        error: { code: 409, message: 'already logged in' },
      });
      assert.deepEqual((await t.call('POST', '/v1/sandbox/scan', {})).body, {
        error: { code: 409, message: 'already logged in' },
      });

      const again = await t.call('POST', '/v1/session/connect');
      assert.equal(again.body.data.jid, jid, 'connect on a connected instance succeeds again (idempotent)');

      assert.deepEqual((await t.call('POST', '/v1/session/disconnect')).body.data, {
        details: 'Disconnected',
      });
      assert.deepEqual(await status(), {
        connected: false,
        loggedIn: true,
        jid,
        instanceId: t.instance.id,
        env: 'test',
      });

      const resumed = await t.call('POST', '/v1/session/connect', { immediate: false });
      assert.equal(resumed.status, 200);
      assert.equal(resumed.body.data.jid, jid, 'reconnect needs no new scan');
      assert.deepEqual(await status(), {
        connected: true,
        loggedIn: true,
        jid,
        instanceId: t.instance.id,
        env: 'test',
      });

      assert.deepEqual((await t.call('POST', '/v1/session/logout')).body.data, { details: 'Logged out' });
      assert.deepEqual(await status(), {
        connected: false,
        loggedIn: false,
        instanceId: t.instance.id,
        env: 'test',
      });
      const creds = await t.testStore.store.db
        .selectFrom('engine_auth')
        .selectAll()
        .where('instance_id', '=', t.instance.id)
        .execute();
      assert.deepEqual(creds, [], 'logout deletes the stored credentials');
      const after = await t.testStore.store.db
        .selectFrom('instances')
        .selectAll()
        .where('id', '=', t.instance.id)
        .executeTakeFirstOrThrow();
      assert.equal(after.jid, null);
      assert.equal(after.phone, null);

      await t.call('POST', '/v1/session/connect');
      assert.deepEqual(await status(), {
        connected: true,
        loggedIn: false,
        instanceId: t.instance.id,
        env: 'test',
      });
      assert.equal(
        (await t.call('GET', '/v1/session/qr')).status,
        200,
        'a new scan is required after logout',
      );
    });

    it('rotates QR codes: 60 s, then 20 s each, six codes, then the attempt ends', async () => {
      const t2 = await createTestApp({ dialect, testStore: t.testStore, clock: t.clock });
      try {
        const instance = await t2.newInstance('test', 'rotation');
        const q = `?from=${instance.id}`;
        await t2.call('POST', `/v1/session/connect${q}`);
        const start = t2.clock();
        const codes: string[] = [];
        const first = (await t2.call('GET', `/v1/session/qr${q}`)).body.data;
        codes.push(first.code);
        t2.clock.advance(59_999);
        assert.equal(
          (await t2.call('GET', `/v1/session/qr${q}`)).body.data.code,
          first.code,
          'first code lives 60 s',
        );
        for (let i = 1; i < 6; i++) {
          t2.clock.set(start + 60_000 + (i - 1) * 20_000);
          const qr = (await t2.call('GET', `/v1/session/qr${q}`)).body.data;
          assert.equal(Date.parse(qr.expiresAt), start + 60_000 + i * 20_000);
          assert.equal(decodeQr(qr.qrCode), qr.code);
          codes.push(qr.code);
        }
        assert.equal(new Set(codes).size, 6, 'six distinct codes');
        t2.clock.set(start + 160_000);
        assert.deepEqual((await t2.call('GET', `/v1/session/qr${q}`)).body, {
          error: { code: 409, message: 'instance is not connected' },
        });
        assert.equal((await t2.call('GET', `/v1/session/status${q}`)).body.data.connected, false);
        assert.deepEqual((await t2.call('POST', `/v1/sandbox/scan${q}`, {})).body, {
          error: { code: 409, message: 'instance is not connected' },
        });
        await t2.call('POST', `/v1/session/connect${q}`);
        const next = (await t2.call('GET', `/v1/session/qr${q}`)).body.data;
        assert.ok(!codes.includes(next.code), 'a new attempt shows new codes');
      } finally {
        await t2.close();
      }
    });

    it('stores the subscription: all four on first connect, replaced when given, kept when omitted', async () => {
      const instance = await t.newInstance('test', 'subs');
      const q = `?from=${instance.id}`;
      const first = await t.call('POST', `/v1/session/connect${q}`, {});
      assert.equal(first.body.data.events, 'Message,ReadReceipt,HistorySync,ChatPresence');
      const chosen = await t.call('POST', `/v1/session/connect${q}`, {
        subscribe: ['ReadReceipt', 'Message', 'Message'],
      });
      assert.equal(chosen.body.data.events, 'Message,ReadReceipt', 'canonical order, duplicates dropped');
      const kept = await t.call('POST', `/v1/session/connect${q}`, {});
      assert.equal(kept.body.data.events, 'Message,ReadReceipt');
      const row = await t.testStore.store.db
        .selectFrom('instances')
        .select('subscribe')
        .where('id', '=', instance.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(JSON.parse(row.subscribe ?? 'null'), ['Message', 'ReadReceipt']);
      const unknown = await t.call('POST', `/v1/session/connect${q}`, { subscribe: ['Message', 'Typing'] });
      assert.deepEqual(unknown.body, {
        error: {
          code: 400,
          message:
            'subscribe contains unknown event type Typing (allowed: Message, ReadReceipt, HistorySync, ChatPresence, MessageUpdate, GroupUpdate, Call, PollVote, SessionStatus, MessageStatus)',
        },
      });
      const notArray = await t.call('POST', `/v1/session/connect${q}`, { subscribe: 'Message' });
      assert.deepEqual(notArray.body, { error: { code: 400, message: 'subscribe must be an array' } });
      const badImmediate = await t.call('POST', `/v1/session/connect${q}`, { immediate: 'soon' });
      assert.deepEqual(badImmediate.body, { error: { code: 400, message: 'immediate must be a boolean' } });
    });

    it('configures the HMAC key sealed at rest and never returns it', async () => {
      const instance = await t.newInstance('test', 'hmac');
      const q = `?from=${instance.id}`;
      const short = await t.call('POST', `/v1/session/hmac/config${q}`, { hmacKey: 'x'.repeat(31) });
      assert.deepEqual(short.body, {
        error: { code: 400, message: 'hmacKey must be at least 32 characters' },
      });
      assert.deepEqual((await t.call('POST', `/v1/session/hmac/config${q}`, { hmacKey: 12345 })).body, {
        error: { code: 400, message: 'hmacKey must be a string' },
      });
      assert.deepEqual((await t.call('POST', `/v1/session/hmac/config${q}`, {})).body, {
        error: { code: 400, message: 'hmacKey is required' },
      });
      assert.deepEqual((await t.call('GET', `/v1/session/hmac/config${q}`)).body.data, { configured: false });
      const secret = `${'k'.repeat(16)}secret-hmac-key-0123`;
      const set = await t.call('POST', `/v1/session/hmac/config${q}`, { hmacKey: secret });
      assert.deepEqual(set.body, { success: true, code: 200, data: { details: 'HMAC key configured' } });
      assert.deepEqual((await t.call('GET', `/v1/session/hmac/config${q}`)).body.data, { configured: true });
      const row = await t.testStore.store.db
        .selectFrom('instances')
        .select('hmac_key')
        .where('id', '=', instance.id)
        .executeTakeFirstOrThrow();
      assert.ok(row.hmac_key && !row.hmac_key.includes('secret-hmac-key'), 'stored sealed, not in clear');
      assert.equal(t.services.box.open(row.hmac_key), secret);
      assert.deepEqual((await t.call('DELETE', `/v1/session/hmac/config${q}`)).body.data, {
        details: 'HMAC key removed',
      });
      assert.deepEqual((await t.call('GET', `/v1/session/hmac/config${q}`)).body.data, { configured: false });
    });
  });
}
