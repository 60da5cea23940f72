/**
 * How parley's live engine reacts to the platform's failures, provoked through the simulator: the phone unlinks
 * the device (401), another login replaces the socket (440), the socket is dropped (with a message whose
 * acknowledgement was lost, handed over again), parley restarts, and two
 * parley processes share one store. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { startReceiver } from '../support/https-receiver.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import {
  companion,
  control,
  liveApp,
  pairLive,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine faults against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let phone = 5511970000000;
    const nextAccount = async () => {
      phone += 1;
      const account = String(phone);
      assert.equal((await control(sim, 'POST', '/users', { phone: account })).status, 201);
      return account;
    };
    before(async () => {
      sim = await startTestSimulator();
    });
    after(async () => {
      await sim.close();
    });

    it('the phone unlinks the device (401): false,false with the reason; the credentials are gone', async () => {
      const app = await liveApp(sim, { dialect });
      try {
        const account = await nextAccount();
        await pairLive(sim, app, account);
        assert.equal(
          (await control(sim, 'POST', '/faults', { phone: account, kind: 'stream-error', code: 401 })).status,
          200,
        );
        const s = await waitForStatus(app, false, false);
        assert.match(s.reason ?? '', /logged out \(401\)/);
        const stored = await app.t.testStore.store.db
          .selectFrom('instances')
          .select('id')
          .where('id', '=', app.instanceId)
          .executeTakeFirst();
        assert.ok(stored, 'the instance stays');
        const connect = await app.live('POST', '/v1/session/connect');
        assert.equal(connect.status, 200);
        const qr = await app.live('GET', '/v1/session/qr');
        assert.equal(qr.status, 200, 'a new pairing starts: the old credentials were wiped');
        assert.equal((await companion(sim, account)).linked, false);
      } finally {
        await app.t.close();
      }
    });

    it('replaced (440): the instance stops and does not reconnect', async () => {
      const app = await liveApp(sim, { dialect });
      try {
        const account = await nextAccount();
        await pairLive(sim, app, account);
        assert.equal(
          (await control(sim, 'POST', '/faults', { phone: account, kind: 'stream-error', code: 440 })).status,
          200,
        );
        const s = await waitForStatus(app, false, true);
        assert.match(s.reason ?? '', /replaced \(440\): .*not reconnecting/);
        assert.equal((await companion(sim, account)).sockets, 0);
        // Taking over is explicit: connect logs in again without a scan.
        assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
        await waitForStatus(app, true, true);
        assert.equal((await companion(sim, account)).sockets, 1);
      } finally {
        await app.t.close();
      }
    });
    it('a dropped socket: status false meanwhile, then reconnected with backoff without a scan', async () => {
      const app = await liveApp(sim, { dialect });
      try {
        const account = await nextAccount();
        await pairLive(sim, app, account);
        const relogin = new Promise((resolve) => sim.context.events.once('login', resolve));
        assert.equal((await control(sim, 'POST', '/faults', { phone: account, kind: 'drop' })).status, 200);
        await until('the simulator saw the socket go', async () =>
          (await companion(sim, account)).sockets === 0 ? true : undefined,
        );
        const meanwhile = await app.status();
        assert.deepEqual([meanwhile.connected, meanwhile.loggedIn], [false, true]);
        await relogin;
        await waitForStatus(app, true, true);
        assert.equal((await companion(sim, account)).sockets, 1);
      } finally {
        await app.t.close();
      }
    });

    it('a message whose acknowledgement was lost comes again offline after a drop, and makes one webhook', async () => {
      const receiver = await startReceiver();
      const app = await liveApp(sim, { dialect });
      try {
        const account = await nextAccount();
        const friend = await nextAccount();
        await pairLive(sim, app, account);
        assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
        const messageWebhooks = (id: string) =>
          bodies(receiver.requests).filter((b) => b.type === 'Message' && b.event.info.id === id);
        // The platform never gets parley's acknowledgement of the first message: it keeps it for the device, and hands
        // the same stanza over again, marked offline, after the reconnect. Whatever the engine makes of the repeat
        // (its Signal session has moved past that ciphertext; a repeat it did decrypt is an `append` upsert, told a
        // copy by the recorder), the integrator sees the message once.
        assert.equal(
          (await control(sim, 'POST', '/faults', { phone: account, kind: 'lose-acks' })).status,
          200,
        );
        const first = await control(sim, 'POST', '/messages', {
          from: friend,
          to: account,
          text: 'only once',
        });
        assert.equal(first.status, 201);
        await until('its webhook', () => (messageWebhooks(first.body.id).length > 0 ? true : undefined));
        const relogin = new Promise((resolve) => sim.context.events.once('login', resolve));
        assert.equal((await control(sim, 'POST', '/faults', { phone: account, kind: 'drop' })).status, 200);
        await relogin;
        await waitForStatus(app, true, true);
        // A message sent after the reconnect marks the end of the offline hand-over: its webhook comes after.
        const second = await control(sim, 'POST', '/messages', {
          from: friend,
          to: account,
          text: 'after it',
        });
        await until('the later webhook', () =>
          messageWebhooks(second.body.id).length > 0 ? true : undefined,
        );
        assert.equal(
          sim.context.accounts.get(account)?.devices.get(1)?.offline.length,
          0,
          'the simulator handed the message over again',
        );
        assert.equal(
          messageWebhooks(first.body.id).length,
          1,
          'the message handed over again made a second webhook',
        );
        const events = await app.t.services.store.db
          .selectFrom('webhook_events')
          .select('type')
          .where('instance_id', '=', app.instanceId)
          .where('type', '=', 'Message')
          .execute();
        assert.equal(events.length, 2, 'one Message event each');
      } finally {
        await app.t.close();
        await receiver.close();
      }
    });

    it('parley restarted: the session is restored without a scan and messages flow', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const first = await liveApp(sim, { testStore });
        const account = await nextAccount();
        await pairLive(sim, first, account);
        await first.t.close();
        await until('the socket closed', async () =>
          (await companion(sim, account)).sockets === 0 ? true : undefined,
        );
        const second = await liveApp(sim, {
          testStore,
          existing: { instanceId: first.instanceId, liveKey: first.liveKey },
        });
        try {
          // What `parley serve` does at boot (src/server.ts): restore every session that was connected.
          assert.equal(await second.t.services.sessions.restoreAll(), 1);
          const s = await waitForStatus(second, true, true);
          assert.equal(s.jid, `${account}:1@s.whatsapp.net`);
          const friend = await nextAccount();
          const sent = await second.live('POST', '/v1/messages/send', {
            phone: friend,
            body: 'after the restart',
          });
          assert.equal(sent.status, 200, JSON.stringify(sent.body));
          await until('the text in the inbox', () =>
            sim.context.accounts.get(friend)?.inbox.find((e) => e.text === 'after the restart'),
          );
        } finally {
          await second.t.close();
        }
      } finally {
        await testStore.cleanup();
      }
    });

    it('two parley processes on one store: the simulator never sees two sockets for the device', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const first = await liveApp(sim, { testStore });
        const account = await nextAccount();
        await pairLive(sim, first, account);
        const second = await liveApp(sim, {
          testStore,
          existing: { instanceId: first.instanceId, liveKey: first.liveKey },
        });
        try {
          const connect = await second.live('POST', '/v1/session/connect');
          assert.equal(connect.status, 409, JSON.stringify(connect.body));
          assert.match(connect.body.error.message, /another parley process/);
          assert.equal((await companion(sim, account)).sockets, 1);
          const s = await first.status();
          assert.deepEqual([s.connected, s.loggedIn], [true, true]);
        } finally {
          await second.t.close();
        }
        await first.t.close();
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
