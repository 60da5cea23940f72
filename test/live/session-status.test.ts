/**
 * SessionStatus webhooks of a live instance against the platform simulator (docs/api.md "Events",
 * docs/decisions/0012-session-and-message-status-events.md), delivered to a real HTTPS receiver: a QR pairing
 * (qr, pairing, connected), a dropped socket (disconnected, reconnecting, then connected), another client taking
 * over (replaced, stream error 440), a blocked account (restricted: 403 at once, or a login refused again and
 * again) and the phone unlinking the device
 * (logged_out, 401). Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, bodies, HMAC_KEY } from '../webhooks/support.ts';
import { control, type LiveApp, liveApp, startTestSimulator, until, waitForStatus } from './support.ts';

/** Refusals in a row after which a reconnecting session stops, as configured here. */
const REFUSAL_LIMIT = 2;

for (const dialect of testDialects()) {
  describe(`SessionStatus webhooks of a live instance (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    let receiver: Receiver;
    const account = '5511970000001';

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect, tuning: { loginRefusalLimit: REFUSAL_LIMIT } });
      receiver = await startReceiver();
      assert.equal((await control(sim, 'POST', '/users', { phone: account })).status, 201);
      for (const [path, body] of [
        ['/v1/session/hmac/config', { hmacKey: HMAC_KEY }],
        ['/v1/webhook', { webhookUrl: receiver.url }],
      ] as const) {
        const response = await app.live('POST', path, body);
        assert.equal(response.status, 200, JSON.stringify(response.body));
      }
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    /** The SessionStatus bodies received so far (all of them: nothing else is subscribed), signed, in order. */
    const statuses = () => {
      for (const request of receiver.requests) assertSigned(request);
      const got = bodies(receiver.requests).sort((a, b) => a.sequence - b.sequence);
      for (const body of got) {
        assert.equal(body.type, 'SessionStatus');
        assert.equal(body.instanceId, app.instanceId);
      }
      return got.map((body) => body.event);
    };
    /** Waits until `count` statuses arrived; returns the ones from index `from` on. */
    const received = async (count: number, from: number) => {
      await until(`${count} SessionStatus webhooks`, () =>
        receiver.requests.length >= count ? true : undefined,
      );
      return statuses().slice(from);
    };
    const at = () => new Date(app.t.clock()).toISOString();
    const fault = async (body: Record<string, unknown>) => {
      const response = await control(sim, 'POST', '/faults', { phone: account, ...body });
      assert.equal(response.status, 200, JSON.stringify(response.body));
    };

    it('a QR pairing: qr, then pairing once the phone scanned, then connected', async () => {
      const connect = await app.live('POST', '/v1/session/connect', { subscribe: ['SessionStatus'] });
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      assert.equal(connect.body.data.events, 'SessionStatus');
      const qr = await app.live('GET', '/v1/session/qr');
      assert.equal(qr.status, 200, JSON.stringify(qr.body));
      assert.equal(
        (await control(sim, 'POST', '/scan', { code: qr.body.data.code, phone: account })).status,
        200,
      );
      await waitForStatus(app, true, true);
      assert.deepEqual(await received(3, 0), [
        { status: 'qr', at: at() },
        { status: 'pairing', at: at() },
        { status: 'connected', at: at() },
      ]);
    });

    it('a dropped socket: disconnected with the reconnect in its reason, then connected again', async () => {
      await fault({ kind: 'drop' });
      const [dropped, back] = await received(5, 3);
      assert.equal(dropped?.status, 'disconnected');
      assert.match(dropped?.reason ?? '', /; reconnecting in \d+(\.\d)? s$/);
      assert.deepEqual(dropped, { status: 'disconnected', reason: dropped?.reason, at: at() });
      assert.deepEqual(back, { status: 'connected', at: at() });
      await waitForStatus(app, true, true);
    });

    it('another client takes over (440): replaced; connect takes it back', async () => {
      await fault({ kind: 'stream-error', code: 440 });
      assert.deepEqual(await received(6, 5), [
        {
          status: 'replaced',
          reason:
            'replaced (440): another client connected with these credentials; not reconnecting (call connect to take over)',
          at: at(),
        },
      ]);
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      assert.deepEqual(await received(7, 6), [{ status: 'connected', at: at() }]);
    });

    it('the account is blocked (403): restricted; unblocked, connect logs in again', async () => {
      await fault({ kind: 'block', code: 403 });
      assert.deepEqual(await received(8, 7), [
        {
          status: 'restricted',
          reason:
            'forbidden by the platform (403): the account may be banned or the phone unlinked; not reconnecting',
          at: at(),
        },
      ]);
      await fault({ kind: 'unblock' });
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      assert.deepEqual(await received(9, 8), [{ status: 'connected', at: at() }]);
    });

    it('a login refused again and again (blocked, 503): disconnected while retrying, then restricted', async () => {
      await fault({ kind: 'block', code: 503 });
      const [retrying, stopped] = await received(11, 9);
      assert.match(retrying?.reason ?? '', /^platform unavailable \(503\); reconnecting in \d+(\.\d)? s$/);
      assert.deepEqual(retrying, { status: 'disconnected', reason: retrying?.reason, at: at() });
      assert.deepEqual(stopped, {
        status: 'restricted',
        reason: `the platform refused the login ${REFUSAL_LIMIT} times in a row (last: platform unavailable (503)); not reconnecting: the account may be blocked or banned, check it on the phone, then call connect to try again`,
        at: at(),
      });
      await fault({ kind: 'unblock' });
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      assert.deepEqual(await received(12, 11), [{ status: 'connected', at: at() }]);
    });

    it('the phone unlinks the device (401): logged_out with the reason', async () => {
      await fault({ kind: 'stream-error', code: 401 });
      await waitForStatus(app, false, false);
      assert.deepEqual(await received(13, 12), [
        {
          status: 'logged_out',
          reason:
            'logged out (401): the device was unlinked from the phone; credentials deleted, connect and scan a new QR',
          at: at(),
        },
      ]);
      const sequences = bodies(receiver.requests).map((body) => body.sequence);
      assert.deepEqual(
        sequences,
        [...sequences].sort((a, b) => a - b),
        'delivered in sequence order',
      );
      assert.equal(receiver.requests.length, 13, 'no other webhook');
    });
  });
}
