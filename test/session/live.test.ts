import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { updateInstance } from '../../src/store/instances.ts';
import { createTestApp } from '../support/app.ts';
import { FakeEngine } from '../support/fake-engine.ts';

async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('live instances (docs/decisions/0025-live-engine.md, docs/decisions/0016-session-lifecycle.md)', () => {
  it('connecting with no platform reachable answers 503 promptly and the process stays healthy', async () => {
    const t = await createTestApp();
    try {
      const live = await t.newInstance('live', 'phone');
      const key = await t.newKey({ env: 'live' });
      const headers = { authorization: `Bearer ${key}` };
      const r = await t.call('POST', `/v1/session/connect?from=${live.id}`, {}, headers);
      assert.equal(r.status, 503);
      assert.match(r.body.error.message, /^cannot reach the platform: /);
      const status = await t.call('GET', `/v1/session/status?from=${live.id}`, undefined, headers);
      assert.equal(status.body.data.connected, false);
      assert.equal((await t.app.inject({ url: '/healthz' })).statusCode, 200);
      const locks = await t.testStore.store.db.selectFrom('instance_locks').selectAll().execute();
      assert.deepEqual(locks, [], 'a failed connect leaves no lock behind');
    } finally {
      await t.close();
    }
  });

  it('retries a boot restore that found the platform unreachable until it connects', async () => {
    const engine = new FakeEngine({ unreachableTimes: 2 });
    const t = await createTestApp({ liveEngine: engine, restoreRetry: { baseMs: 5, maxMs: 20 } });
    try {
      const live = await t.newInstance('live', 'phone');
      await updateInstance(t.testStore.store.db, live.id, {
        desiredState: 'connected',
        jid: '5511999990999:3@s.whatsapp.net',
      });
      assert.equal(await t.services.sessions.restoreAll(), 0, 'the first try fails');
      assert.equal(t.services.sessions.pendingRestores, 1);
      await until(
        () => t.services.sessions.existing(live.id)?.state().connected === true,
        'the retried restore',
      );
      assert.equal(engine.behaviour.connects, 3);
      assert.equal(t.services.sessions.pendingRestores, 0);
    } finally {
      await t.close();
    }
  });

  it('a user disconnect cancels a pending restore retry', async () => {
    const engine = new FakeEngine({ unreachableTimes: 100 });
    const t = await createTestApp({ liveEngine: engine, restoreRetry: { baseMs: 60_000, maxMs: 60_000 } });
    try {
      const live = await t.newInstance('live', 'phone');
      await updateInstance(t.testStore.store.db, live.id, {
        desiredState: 'connected',
        jid: '5511999990999:3@s.whatsapp.net',
      });
      await t.services.sessions.restoreAll();
      assert.equal(t.services.sessions.pendingRestores, 1);
      const key = await t.newKey({ env: 'live' });
      await t.call('POST', `/v1/session/disconnect?from=${live.id}`, {}, { authorization: `Bearer ${key}` });
      assert.equal(t.services.sessions.pendingRestores, 0);
    } finally {
      await t.close();
    }
  });

  it('a session that should be connected: 503 only while it comes back by itself, then 409', async () => {
    const engine = new FakeEngine({ unreachableTimes: 100 });
    const t = await createTestApp({ liveEngine: engine, restoreRetry: { baseMs: 60_000, maxMs: 60_000 } });
    try {
      const live = await t.newInstance('live', 'phone');
      await updateInstance(t.testStore.store.db, live.id, {
        desiredState: 'connected',
        jid: '5511999990999:3@s.whatsapp.net',
      });
      await t.services.sessions.restoreAll();
      assert.equal(t.services.sessions.pendingRestores, 1);
      const headers = { authorization: `Bearer ${await t.newKey({ env: 'live' })}` };
      const send = () =>
        t.call('POST', `/v1/messages/send?from=${live.id}`, { phone: '5511988887777', body: 'hi' }, headers);
      const restoring = await send();
      assert.equal(restoring.status, 503, 'the restore is retried: it comes back by itself');
      assert.equal(restoring.headers['retry-after'], '2');
      // The user's own connect cancels the retry and fails: nothing brings the session back but another connect.
      assert.equal((await t.call('POST', `/v1/session/connect?from=${live.id}`, {}, headers)).status, 503);
      assert.equal(t.services.sessions.pendingRestores, 0);
      const stopped = await send();
      assert.deepEqual(
        [stopped.status, stopped.headers['retry-after'], stopped.body],
        [409, undefined, { error: { code: 409, message: 'instance is not connected' } }],
        'no Retry-After for a session that does not come back by itself',
      );
      const check = await t.call(
        'POST',
        `/v1/contacts/check?from=${live.id}`,
        { phones: ['5511988887777'] },
        headers,
      );
      assert.equal(check.status, 409, JSON.stringify(check.body));
    } finally {
      await t.close();
    }
  });

  it('connect with immediate:false answers 504 when the login is not verified in time', async () => {
    const t = await createTestApp({ liveEngine: new FakeEngine({ loginVerifies: false }) });
    try {
      const live = await t.newInstance('live', 'phone');
      await updateInstance(t.testStore.store.db, live.id, { jid: '5511999990999:3@s.whatsapp.net' });
      const key = await t.newKey({ env: 'live' });
      const r = await t.call(
        'POST',
        `/v1/session/connect?from=${live.id}`,
        { immediate: false },
        { authorization: `Bearer ${key}` },
      );
      assert.deepEqual(r.body, {
        error: { code: 504, message: 'login could not be verified within 10 seconds' },
      });
    } finally {
      await t.close();
    }
  });

  it('pairing by code: live engines answer the code, the sandbox points to the scan helper', async () => {
    const t = await createTestApp({ liveEngine: new FakeEngine() });
    try {
      const sandbox = await t.call('POST', '/v1/session/pairing-code', { phone: '5511999990000' });
      assert.deepEqual(sandbox.body, {
        error: {
          code: 400,
          message:
            'pairing by code is available on live instances only; the sandbox pairs with POST /v1/sandbox/scan',
        },
      });
      const bad = await t.call('POST', '/v1/session/pairing-code', { phone: '+55 11' });
      assert.equal(bad.status, 400);
      assert.match(bad.body.error.message, /^phone must be digits only/);
      const live = await t.newInstance('live', 'phone');
      const key = await t.newKey({ env: 'live' });
      const headers = { authorization: `Bearer ${key}` };
      const code = await t.call(
        'POST',
        `/v1/session/pairing-code?from=${live.id}`,
        { phone: '5511999990000' },
        headers,
      );
      assert.deepEqual(
        code.body,
        { error: { code: 409, message: 'already logged in' } },
        'the fake is logged in',
      );
    } finally {
      await t.close();
    }
  });
});
