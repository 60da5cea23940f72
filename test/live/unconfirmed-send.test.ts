/**
 * Sends the platform never acknowledged, over real sockets to the simulator (docs/decisions/0009-sends-as-jobs.md): a
 * missing ack is an unknown outcome, never a success. The engine ends the connection as lost, the send's job stays
 * unconfirmed, and after the next login it is relayed again under its id, which the recipient's phone shows once.
 * Two ways an ack goes missing: the platform took the message but its ack was lost on the way (the simulator's
 * `withhold-acks`), and a connection that went silent both ways (a proxy between parley and the simulator frozen:
 * nothing arrives, nothing closes). Before, the synchronous send was answered `200 Sent` once the ack wait ran out,
 * and in the second case the message never reached the platform: lost, yet shown `sent`. Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
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

/** How long the engine waits for an ack here, ms. */
const ACK_MS = 2_000;

for (const dialect of testDialects()) {
  describe(`live sends the platform never acknowledged (${dialect})`, () => {
    let sim: Simulator;
    let proxy: FlightProxy;
    let app: LiveApp;
    const { linkedPair } = simulatorAccounts(
      () => sim,
      () => app,
      5511971000000,
    );
    const send = (to: string, body: string) => app.live('POST', '/v1/messages/send', { phone: to, body });
    const queue = (to: string, body: string) =>
      app.t.call(
        'POST',
        `/v1/messages/send?from=${app.instanceId}`,
        { phone: to, body },
        { authorization: `Bearer ${app.liveKey}`, prefer: 'respond-async' },
      );
    /** What the friend's phone shows of the texts `text` from `account`. */
    const shown = (friend: string, account: string, text: string) =>
      (sim.context.accounts.get(friend)?.inbox ?? []).filter((e) => e.from === account && e.text === text);
    const job = (id: string) =>
      app.t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts'])
        .where('instance_id', '=', app.instanceId)
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const logins = async (account: string) =>
      (
        (await control(sim, 'GET', '/connections')).body.attempts as { phone?: string; loggedIn: boolean }[]
      ).filter((a) => a.phone === account && a.loggedIn).length;

    before(async () => {
      sim = await startTestSimulator();
      proxy = await startFlightProxy({ host: '127.0.0.1', port: sim.port });
      const viaProxy: Simulator = { ...sim, url: `ws://127.0.0.1:${proxy.port}/ws/chat` };
      app = await liveApp(viaProxy, { dialect, tuning: { ackTimeoutMs: ACK_MS } });
    });
    after(async () => {
      await app.t.close();
      await proxy.close();
      await sim.close();
    });

    it('its ack was lost: connection renewed, relayed again under its id, shown once', async () => {
      const { account, friend } = await linkedPair();
      const before = await logins(account);
      const withheld = await control(sim, 'POST', '/faults', { phone: account, kind: 'withhold-acks' });
      assert.equal(withheld.status, 200, JSON.stringify(withheld.body));
      const t0 = Date.now();
      const sent = await send(friend, 'its ack was lost');
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      assert.ok(Date.now() - t0 >= ACK_MS, 'answered only once a relay was acknowledged');
      const { id } = sent.body.data as { id: string };
      assert.ok(
        (await logins(account)) > before,
        'the connection without acks was ended and replaced by a login',
      );
      const entries = shown(friend, account, 'its ack was lost');
      assert.deepEqual(
        entries.map((e) => [e.id, e.copies ?? 0]),
        [[id, 1]],
        'the phone shows the message once: the second relay under its id is counted as a copy',
      );
      assert.deepEqual({ ...(await job(id)) }, { status: 'sent', attempts: 2 });
      const stored = await app.live('GET', `/v1/messages/${id}`);
      assert.equal(stored.status, 200, JSON.stringify(stored.body));
      assert.notEqual(stored.body.data.status, 'failed');
      await waitForStatus(app, true, true);
    });

    it('a frozen connection: no 200 before the platform has it; both sends arrive once, in order', async () => {
      const { account, friend } = await linkedPair();
      // A first text, so the friend's devices and Signal session are known: the relays below need no query.
      assert.equal((await send(friend, 'warm-up')).status, 200);
      await until('the warm-up shown', () =>
        shown(friend, account, 'warm-up').length > 0 ? true : undefined,
      );
      const before = await logins(account);
      // The connection is dropped once the ack wait runs out, with no closing handshake: one waits for the peer's
      // close frame, which a frozen peer never sends (the `ws` library gives up after 30 s), before the reconnect.
      proxy.freeze();
      const t0 = Date.now();
      const sync = send(friend, 'into the frozen socket');
      // Accepted after the synchronous send: queued behind it.
      await until('the synchronous send stored', async () =>
        (await app.t.services.store.db
          .selectFrom('send_jobs')
          .select('id')
          .where('instance_id', '=', app.instanceId)
          .where('status', '!=', 'sent')
          .executeTakeFirst()) === undefined
          ? undefined
          : true,
      );
      const queued = await queue(friend, 'queued behind it');
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      // The ack wait, the reconnect's first backoff (1 s) and a login, not the 30 s of a closing handshake.
      await until(
        'the next login, with no closing handshake before the reconnect',
        async () => ((await logins(account)) > before ? true : undefined),
        ACK_MS + 10_000,
      );
      const answer = await sync;
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      const { id } = answer.body.data as { id: string };
      assert.deepEqual(
        shown(friend, account, 'into the frozen socket').map((e) => [e.id, e.copies ?? 0]),
        [[id, 0]],
        `answered sent after ${Date.now() - t0} ms: the platform has it, once (the first relay never arrived)`,
      );
      assert.deepEqual({ ...(await job(id)) }, { status: 'sent', attempts: 2 });
      const queuedId = (queued.body.data as { id: string }).id;
      await until('the queued send sent', async () =>
        (await job(queuedId)).status === 'sent' ? true : undefined,
      );
      const inbox = sim.context.accounts.get(friend)?.inbox ?? [];
      assert.deepEqual(
        inbox.filter((e) => e.from === account && e.type === 'text').map((e) => [e.text, e.copies ?? 0]),
        [
          ['warm-up', 0],
          ['into the frozen socket', 0],
          ['queued behind it', 0],
        ],
        'each once, in acceptance order',
      );
    });
  });
}
