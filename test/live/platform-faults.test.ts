/**
 * parley's live engine under the platform's faults, provoked through the simulator and observed through parley's
 * HTTP API: a platform that stops answering keep-alive pings (reconnect within the keep-alive window), a message
 * the platform rejects (502 with its reason), the platform's rate-overlimit and reach-out timelock (429 each with
 * its own message and Retry-After), and a blocked account refused at every login (the restart loop stops after
 * the configured number of refusals, with the reason in the status), and a login refused as outdated (405) after
 * every version refresh (the loop stops after three; the status said it was retrying while nothing retried). Runs on
 * SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { BACKOFF_MAX_MS } from '../../src/engines/baileys/close-policy.ts';
import { testDialects } from '../support/store.ts';
import {
  companion,
  control,
  type LiveApp,
  liveApp,
  pairLive,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

/** Keep-alive interval the engine is configured with here, ms. */
const KEEP_ALIVE_MS = 1_000;
/** Refusals in a row after which a reconnecting session stops, as configured here. */
const REFUSAL_LIMIT = 3;
/** Baileys declares the connection lost once nothing arrived for the interval plus this, ms (Socket/socket.js). */
const BAILEYS_GRACE_MS = 5_000;
/** Slack for a login round trip and a loaded machine, ms (added to every bound derived from the settings). */
const SLACK_MS = 15_000;

type Attempt = { at: string; kind: string; phone?: string; loggedIn: boolean };

async function attemptsOf(sim: Simulator, phone: string): Promise<Attempt[]> {
  const { body } = await control(sim, 'GET', '/connections');
  return (body.attempts as Attempt[]).filter((a) => a.phone === phone);
}

for (const dialect of testDialects()) {
  describe(`live engine under platform faults (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    let phone = 5511960000000;
    const nextAccount = async () => {
      phone += 1;
      const account = String(phone);
      assert.equal((await control(sim, 'POST', '/users', { phone: account })).status, 201);
      return account;
    };
    /** A fresh account linked to the app's live instance (logging the previous one out). */
    const linkedAccount = async () => {
      const account = await nextAccount();
      const status = await app.status();
      if (status.loggedIn) assert.equal((await app.live('POST', '/v1/session/logout')).status, 200);
      await pairLive(sim, app, account);
      return account;
    };
    const send = (to: string, body: string) => app.live('POST', '/v1/messages/send', { phone: to, body });

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, {
        dialect,
        tuning: {
          keepAliveIntervalMs: KEEP_ALIVE_MS,
          loginRefusalLimit: REFUSAL_LIMIT,
          // The platform's site is not asked: a refresh fails at once and the current version is kept.
          fetchVersion: () => Promise.reject(new TypeError('fetch failed')),
        },
      });
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('silence (no pongs): the engine notices within the keep-alive window and logs in again without a scan', async () => {
      const account = await linkedAccount();
      const logins = (await attemptsOf(sim, account)).filter((a) => a.loggedIn).length;
      const since = (await control(sim, 'GET', '/connections')).body.attempts.length as number;
      const silenced = await control(sim, 'POST', '/faults', { phone: account, kind: 'silence' });
      assert.deepEqual(silenced.body, { phone: account, kind: 'silence', sockets: 1 });
      // Baileys checks once per interval and gives up after interval + 5 s of nothing: two intervals plus the
      // grace, then the first reconnect's largest delay (1 s + 20 % jitter).
      const window = 2 * KEEP_ALIVE_MS + BAILEYS_GRACE_MS + 1_200 + SLACK_MS;
      await until(
        'a new login after the silence',
        async () =>
          (await attemptsOf(sim, account)).filter((a) => a.loggedIn).length > logins ? true : undefined,
        window,
      );
      const s = await waitForStatus(app, true, true);
      assert.equal(s.jid, `${account}:1@s.whatsapp.net`);
      assert.equal((await companion(sim, account)).sockets, 1, 'the silent socket is gone, one socket left');
      const later = ((await control(sim, 'GET', '/connections')).body.attempts as Attempt[]).slice(since);
      assert.deepEqual(
        later.map((a) => [a.kind, a.phone, a.loggedIn]),
        [['login', account, true]],
        'one login, no pairing',
      );
    });

    it('a message the platform rejects: 502 with its reason, nothing delivered; the next send goes through', async () => {
      const account = await linkedAccount();
      const friend = await nextAccount();
      const nack = await control(sim, 'POST', '/faults', { phone: account, kind: 'nack', code: 479 });
      assert.deepEqual(nack.body, { phone: account, kind: 'nack', code: 479, sockets: 1 });
      const refused = await send(friend, 'refused by the platform');
      assert.equal(refused.status, 502, JSON.stringify(refused.body));
      assert.deepEqual(refused.body, {
        error: {
          code: 502,
          message: 'the platform rejected the message (error 479: invalid stanza, smax-invalid)',
        },
      });
      const sent = await send(friend, 'accepted');
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      await until('the second text in the inbox', () =>
        sim.context.accounts.get(friend)?.inbox.find((e) => e.text === 'accepted'),
      );
      assert.equal(
        sim.context.accounts.get(friend)?.inbox.some((e) => e.text === 'refused by the platform'),
        false,
      );
    });

    it("the platform's rate-overlimit (429): parley's 429 with the platform's message and Retry-After", async () => {
      const account = await linkedAccount();
      const friend = await nextAccount();
      await control(sim, 'POST', '/faults', { phone: account, kind: 'nack', code: 429, count: 1 });
      const limited = await send(friend, 'too fast');
      assert.equal(limited.status, 429, JSON.stringify(limited.body));
      assert.deepEqual(limited.body, {
        error: {
          code: 429,
          message: 'the platform rate-limited this account (429 rate-overlimit): slow down and retry later',
          retryAfter: 60,
        },
      });
      assert.equal(limited.headers['retry-after'], '60');
    });

    it('the reach-out timelock: new chats get 429 until its end, existing chats still work', async () => {
      const account = await linkedAccount();
      const known = await nextAccount();
      const stranger = await nextAccount();
      // `known` wrote first, so the chat exists.
      assert.equal(
        (await control(sim, 'POST', '/messages', { from: known, to: account, text: 'hello shop' })).status,
        201,
      );
      const lock = await control(sim, 'POST', '/faults', {
        phone: account,
        kind: 'reachout-lock',
        seconds: 7200,
      });
      assert.deepEqual(lock.body, { phone: account, kind: 'reachout-lock', seconds: 7200, sockets: 1 });
      const ends = sim.context.accounts.get(account)?.restrictions?.reachoutUntil ?? 0;
      const locked = await send(stranger, 'hi, new here');
      assert.equal(locked.status, 429, JSON.stringify(locked.body));
      const endsAt = new Date(Math.ceil(ends / 1000) * 1000).toISOString();
      assert.equal(
        locked.body.error.message,
        `the platform restricts this account from messaging new contacts (463 reach-out timelock) until ${endsAt}; existing chats still work`,
      );
      // parley's clock is frozen at the app's creation: Retry-After counts from there to the lock's end.
      assert.ok(locked.body.error.retryAfter > 7000, JSON.stringify(locked.body));
      const existing = await send(known, 'your order ships today');
      assert.equal(existing.status, 200, JSON.stringify(existing.body));
      await control(sim, 'POST', '/faults', { phone: account, kind: 'reachout-lock', seconds: 0 });
      assert.equal((await send(stranger, 'now it works')).status, 200);
    });

    it('a blocked account refused at every login: the restart loop stops after the bound, reason in the status', async () => {
      const account = await linkedAccount();
      const before = (await attemptsOf(sim, account)).length;
      const blocked = await control(sim, 'POST', '/faults', { phone: account, kind: 'block', code: 503 });
      assert.deepEqual(blocked.body, { phone: account, kind: 'block', code: 503, sockets: 1 });
      // The first refusal ends the open socket; each of the others is a reconnect after its backoff (at most
      // 1.2 s, 2.4 s, … with jitter).
      let window = SLACK_MS;
      for (let attempt = 0; attempt < REFUSAL_LIMIT - 1; attempt++) {
        window += Math.min(BACKOFF_MAX_MS, 1_200 * 2 ** attempt);
      }
      const stopped = await until(
        'the session to stop',
        async () => {
          const s = await app.status();
          return s.reason?.includes('times in a row') ? s : undefined;
        },
        window,
      );
      assert.deepEqual(
        { connected: stopped.connected, loggedIn: stopped.loggedIn, reason: stopped.reason },
        {
          connected: false,
          loggedIn: true,
          reason:
            'the platform refused the login 3 times in a row (last: platform unavailable (503)); not reconnecting: the account may be blocked or banned, check it on the phone, then call connect to try again',
        },
      );
      const refused = (await attemptsOf(sim, account)).slice(before);
      assert.deepEqual(
        refused.map((a) => [a.kind, a.loggedIn]),
        Array.from({ length: REFUSAL_LIMIT - 1 }, () => ['login', false]),
        'one refused login per reconnect, then none',
      );
      // Unblocked, connect logs in again with the stored credentials.
      await control(sim, 'POST', '/faults', { phone: account, kind: 'unblock' });
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      const after = (await attemptsOf(sim, account)).slice(before);
      assert.deepEqual(
        after.map((a) => [a.kind, a.loggedIn]),
        [...Array.from({ length: REFUSAL_LIMIT - 1 }, () => ['login', false]), ['login', true]],
      );
    });

    it('a login refused as outdated (405) after every version refresh: the loop stops, and the status says so', async () => {
      const account = await linkedAccount();
      const before = (await attemptsOf(sim, account)).length;
      const outdated = await control(sim, 'POST', '/faults', { phone: account, kind: 'block', code: 405 });
      assert.deepEqual(outdated.body, { phone: account, kind: 'block', code: 405, sockets: 1 });
      // The open socket ends with the 405, then each login after a refresh (no delay) is refused with it, until the
      // third refresh in a row: 503 while the session comes back by itself, 409 once it stopped.
      const stopped = await until('the session to stop', async () => {
        const answer = await app.live('GET', '/v1/contacts/list');
        return answer.status === 409 ? answer : undefined;
      });
      const status = await app.status();
      const reason =
        'client version outdated (405): refused again after 3 refreshes of the platform version in a row; not reconnecting: update parley, then call connect to try again';
      assert.deepEqual(
        { connected: status.connected, loggedIn: status.loggedIn, reason: status.reason },
        { connected: false, loggedIn: true, reason },
      );
      assert.deepEqual(stopped.body, {
        error: { code: 409, message: `instance is not connected: ${reason}` },
      });
      const refused = (await attemptsOf(sim, account)).slice(before);
      assert.deepEqual(
        refused.map((a) => [a.kind, a.loggedIn]),
        [
          ['login', false],
          ['login', false],
          ['login', false],
        ],
        'one refused login per refresh, then none',
      );
      // Once the platform takes the version again, connect logs in with the stored credentials.
      await control(sim, 'POST', '/faults', { phone: account, kind: 'unblock' });
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
    });
  });
}
