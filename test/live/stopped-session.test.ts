/**
 * Sends and number checks of a live session the platform stopped (docs/decisions/0016-session-lifecycle.md), over
 * real sockets to the simulator: `503 not connected to the platform right now` with `Retry-After` only while the
 * connection comes back by itself; once the platform replaced the session (440), refused the account (403) or
 * refused every login until the engine gave up, nothing brings it back but `connect`, and the answer is `409
 * instance is not connected: <reason>`, without `Retry-After`. Before, those answered the 503 for ever. Queued sends
 * wait for the connection, counted in the status as `pendingSends`, and go out after `connect`. Runs on SQLite, and
 * on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import {
  control,
  type LiveApp,
  liveApp,
  simulatorAccounts,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

/** Refusals in a row after which a reconnecting session stops, as configured here. */
const REFUSAL_LIMIT = 3;

for (const dialect of testDialects()) {
  describe(`live sends after the platform stopped the session (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    const { linkedPair } = simulatorAccounts(
      () => sim,
      () => app,
      5511972000000,
    );
    const send = (to: string, body: string) => app.live('POST', '/v1/messages/send', { phone: to, body });
    const check = (to: string) => app.live('POST', '/v1/contacts/check', { phones: [to] });
    /** A stopped session's answer: 409 with the stop's reason, no Retry-After. */
    const assertStopped = (
      answer: { status: number; headers: Record<string, unknown>; body: unknown },
      reason: string,
    ) =>
      assert.deepEqual(
        [answer.status, answer.headers['retry-after'], answer.body],
        [409, undefined, { error: { code: 409, message: `instance is not connected: ${reason}` } }],
      );

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect, tuning: { loginRefusalLimit: REFUSAL_LIMIT } });
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('replaced (440): 409 with the reason; a queued send waits, shown in the status, goes at connect', async () => {
      const { account, friend } = await linkedPair();
      const fault = await control(sim, 'POST', '/faults', {
        phone: account,
        kind: 'stream-error',
        code: 440,
      });
      assert.equal(fault.status, 200);
      const status = await waitForStatus(app, false, true);
      assert.match(status.reason ?? '', /^replaced \(440\)/);
      assertStopped(await send(friend, 'while replaced'), status.reason ?? '');
      assertStopped(await check(friend), status.reason ?? '');
      const queued = await app.t.call(
        'POST',
        `/v1/messages/send?from=${app.instanceId}`,
        { phone: friend, body: 'queued while replaced' },
        { authorization: `Bearer ${app.liveKey}`, prefer: 'respond-async' },
      );
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      assert.equal(
        (await app.status()).pendingSends,
        1,
        'the status shows the send waiting for the connection',
      );
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      await until('the queued send shown', () =>
        sim.context.accounts.get(friend)?.inbox.find((e) => e.text === 'queued while replaced'),
      );
      await until('nothing pending', async () =>
        (await app.status()).pendingSends === undefined ? true : undefined,
      );
      assert.equal(
        sim.context.accounts.get(friend)?.inbox.some((e) => e.text === 'while replaced'),
        false,
        'the refused send never went out',
      );
    });

    it('forbidden (403): 409 with the reason', async () => {
      const { account, friend } = await linkedPair();
      assert.equal(
        (await control(sim, 'POST', '/faults', { phone: account, kind: 'block', code: 403 })).status,
        200,
      );
      const status = await waitForStatus(app, false, true);
      assert.match(status.reason ?? '', /403/);
      assertStopped(await send(friend, 'while forbidden'), status.reason ?? '');
      assert.equal((await control(sim, 'POST', '/faults', { phone: account, kind: 'unblock' })).status, 200);
    });

    it('refused logins: 503 with Retry-After while it reconnects, 409 once the refusals stop it', async () => {
      const { account, friend } = await linkedPair();
      assert.equal(
        (await control(sim, 'POST', '/faults', { phone: account, kind: 'block', code: 503 })).status,
        200,
      );
      await waitForStatus(app, false, true);
      const reconnecting = await send(friend, 'while reconnecting');
      assert.deepEqual(
        [reconnecting.status, reconnecting.headers['retry-after'], reconnecting.body],
        [503, '2', { error: { code: 503, message: 'not connected to the platform right now' } }],
        'coming back by itself: retry shortly',
      );
      const stopped = await until('the refusals stop the session', async () => {
        const s = await app.status();
        return /refused the login 3 times in a row/.test(s.reason ?? '') ? s : undefined;
      });
      assertStopped(await send(friend, 'after the refusals'), stopped.reason ?? '');
      assert.equal((await control(sim, 'POST', '/faults', { phone: account, kind: 'unblock' })).status, 200);
    });
  });
}
