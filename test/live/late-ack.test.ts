/**
 * Acks that come late, over real sockets to the simulator (docs/decisions/0009-sends-as-jobs.md,
 * docs/decisions/0025-live-engine.md). An ack the platform sent within the engine's wait but that parley read only
 * after it ran out (the process was busy meanwhile: a long synchronous task, a pause of the collector) counts: when
 * the wait's timer comes due the engine first reads what reached the socket, so the job is `sent` after one relay
 * and the connection stays. Before, the timer won: Node runs the timers that came due before it reads its sockets,
 * so the connection was ended as lost with its ack unread, and the job relayed again after the next login. An ack
 * slower than the wait (the simulator's `slow-acks`) comes after the connection was dropped and is never read: the
 * relay's outcome is unknown, it goes out again under its id after the next login, and the recipient's phone shows
 * the message once. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BinaryNode } from 'baileys';
import type { DeviceStanza } from '../../sim/server/session.ts';
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

/** How long the engine waits for an ack here, ms. */
const ACK_MS = 1_000;

/** Keeps the process busy for `ms` milliseconds without yielding to its event loop: a stall, not a wait. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // No timer runs and no socket is read meanwhile.
  }
}

for (const dialect of testDialects()) {
  describe(`live acks that come late (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    const { linkedPair } = simulatorAccounts(
      () => sim,
      () => app,
      5511973000000,
    );
    const send = (to: string, body: string) => app.live('POST', '/v1/messages/send', { phone: to, body });
    /** What the friend's phone shows of the texts `text` from `account`: `[id, copies]`. */
    const shown = (friend: string, account: string, text: string) =>
      (sim.context.accounts.get(friend)?.inbox ?? [])
        .filter((e) => e.from === account && e.text === text)
        .map((e) => [e.id, e.copies ?? 0]);
    const job = async (id: string) => ({
      ...(await app.t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts'])
        .where('instance_id', '=', app.instanceId)
        .where('id', '=', id)
        .executeTakeFirstOrThrow()),
    });
    const logins = async (account: string) =>
      (
        (await control(sim, 'GET', '/connections')).body.attempts as { phone?: string; loggedIn: boolean }[]
      ).filter((a) => a.phone === account && a.loggedIn).length;
    /** A linked pair whose friend got a first text, so its devices and Signal session are known. */
    const warmPair = async () => {
      const pair = await linkedPair();
      assert.equal((await send(pair.friend, 'warm-up')).status, 200);
      await until('the warm-up shown', () =>
        shown(pair.friend, pair.account, 'warm-up').length > 0 ? true : undefined,
      );
      return pair;
    };
    const slowAcks = async (account: string, ms: number) => {
      const fault = await control(sim, 'POST', '/faults', { phone: account, kind: 'slow-acks', ms });
      assert.equal(fault.status, 200, JSON.stringify(fault.body));
    };

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect, tuning: { ackTimeoutMs: ACK_MS } });
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('an ack sent in time, read after the wait ran out: sent after one relay, connection kept', async () => {
      const { account, friend } = await warmPair();
      const before = await logins(account);
      // The simulator acks half way through the engine's wait. Its ack leaves once this turn of the event loop has
      // polled the sockets, and then the process (parley and the simulator run in it) stalls past the wait's end:
      // the next turn finds the wait's timer due and the ack at parley's socket, not read yet.
      await slowAcks(account, ACK_MS / 2);
      let stalled = false;
      const onStanza = ({ user, connection, node }: DeviceStanza) => {
        if (user.phone !== account || node.tag !== 'message') return;
        const write = connection.send.bind(connection);
        connection.send = (out: BinaryNode) => {
          if (out.tag !== 'ack' || out.attrs.id !== node.attrs.id) return write(out);
          connection.send = write;
          setImmediate(() => {
            write(out);
            stalled = true;
            stall(ACK_MS * 2);
          });
        };
      };
      sim.context.events.on('stanza', onStanza);
      try {
        const sent = await send(friend, 'acked, read late');
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        assert.ok(stalled, 'the process stalled once the ack was written');
        const { id } = sent.body.data as { id: string };
        assert.deepEqual(await job(id), { status: 'sent', attempts: 1 }, 'relayed once, its ack counted');
        assert.deepEqual(shown(friend, account, 'acked, read late'), [[id, 0]], 'on the phone once, no copy');
        assert.equal(await logins(account), before, 'the connection was kept: no new login');
        await waitForStatus(app, true, true);
      } finally {
        sim.context.events.off('stanza', onStanza);
      }
    });

    it('an ack slower than the wait: connection dropped, relayed again under its id, shown once', async () => {
      const { account, friend } = await warmPair();
      const before = await logins(account);
      await slowAcks(account, ACK_MS * 2);
      const sent = await send(friend, 'acked too late');
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const { id } = sent.body.data as { id: string };
      assert.ok((await logins(account)) > before, 'the connection was dropped and replaced by a login');
      assert.deepEqual(await job(id), { status: 'sent', attempts: 2 }, 'the second relay was acknowledged');
      assert.deepEqual(
        shown(friend, account, 'acked too late'),
        [[id, 1]],
        'the phone shows it once: the second relay under its id is counted as a copy',
      );
      await waitForStatus(app, true, true);
    });
  });
}
