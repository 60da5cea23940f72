/**
 * Chats, history and calls on a live key against the platform simulator. A simulated user's message and a send
 * to her appear in the chat list and the chat's history with the states her receipts moved them to, and the
 * unread count follows POST /v1/messages/read. A simulated user's call (the platform's `call` stanza with
 * `offer`, then `terminate`) arrives as Call webhooks; with the automatic reject on, the simulator sees Baileys'
 * `reject` stanza and the reject message lands in the caller's inbox. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const shop = '5541999990000';
const ana = '5541988887777';
const bruno = '5541977776666';
const jid = (phone: string) => `${phone}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`live engine: chats, history and calls against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const live = (method: 'GET' | 'POST', url: string, body?: unknown) => app.live(method, url, body);
    const inbox = (phone: string, predicate: (e: InboxEntry) => boolean, what: string) =>
      until(what, () => sim.context.accounts.get(phone)?.inbox.find(predicate));

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
        [bruno, 'Bruno'],
      ]) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      assert.equal((await live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      const subscribed = await live('POST', '/v1/session/connect', {
        subscribe: ['Message', 'ReadReceipt', 'Call'],
      });
      assert.equal(subscribed.status, 200, JSON.stringify(subscribed.body));
      assert.equal(subscribed.body.data.events, 'Message,ReadReceipt,Call');
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it("lists the chat with a user's message and a send to her, in the states her receipts set", async () => {
      const sent = await live('POST', '/v1/messages/send', { phone: ana, body: 'Your order is ready' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const mine = sent.body.data.id;
      await inbox(ana, (e) => e.id === mine && e.text === 'Your order is ready', 'Ana received the send');
      const wrote = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'On my way!' });
      assert.equal(wrote.status, 201, JSON.stringify(wrote.body));
      const hers = (
        await waitForWebhook(
          receiver,
          (b) => b.type === 'Message' && b.event.message.conversation === 'On my way!',
          "Ana's message webhook",
        )
      ).body.event.info.id;
      for (const type of ['delivery', 'read'] as const) {
        const receipt = await control(sim, 'POST', '/receipts', { from: ana, to: shop, ids: [mine], type });
        assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
      }
      await waitForWebhook(
        receiver,
        (b) => b.type === 'ReadReceipt' && b.state === 'Read' && b.event.messageIds.includes(mine),
        'the read receipt webhook',
      );

      const history = await live('GET', `/v1/chats/${ana}/messages`);
      assert.equal(history.status, 200, JSON.stringify(history.body));
      const messages = history.body.data.messages as { id: string; timestamp: string; fromMe: boolean }[];
      assert.deepEqual(messages.map((m) => m.id).sort(), [mine, hers].sort());
      const keys = messages.map((m) => `${m.timestamp} ${m.id}`);
      assert.deepEqual(keys, [...keys].sort().reverse(), 'newest first');
      const byId = new Map(history.body.data.messages.map((m: { id: string }) => [m.id, m]));
      assert.deepEqual(
        (({ fromMe, sender, state, message }) => ({ fromMe, sender, state, message }))(
          byId.get(mine) as never,
        ),
        {
          fromMe: true,
          sender: jid(shop),
          state: 'read',
          message: { conversation: 'Your order is ready' },
        },
      );
      assert.deepEqual(
        (({ fromMe, sender, state, pushName, message }) => ({ fromMe, sender, state, pushName, message }))(
          byId.get(hers) as never,
        ),
        {
          fromMe: false,
          sender: jid(ana),
          state: 'delivered',
          pushName: 'Ana',
          message: { conversation: 'On my way!' },
        },
      );

      const chats = await live('GET', '/v1/chats');
      const chat = chats.body.data.chats.find((c: { jid: string }) => c.jid === jid(ana));
      assert.equal(chat.name, 'Ana');
      assert.equal(chat.isGroup, false);
      assert.equal(chat.unreadCount, 1, "Ana's message is unread");
      assert.equal(chat.lastMessage.id, messages[0]?.id);

      const read = await live('POST', '/v1/messages/read', { id: [hers], chatPhone: ana });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      await inbox(
        ana,
        (e) => e.type === 'receipt' && e.receipt === 'read' && (e.ids ?? []).includes(hers),
        'Ana got the read receipt',
      );
      const after = await live('GET', '/v1/chats');
      assert.equal(after.body.data.chats.find((c: { jid: string }) => c.jid === jid(ana)).unreadCount, 0);
      const one = await live('GET', `/v1/messages/${hers}`);
      assert.equal(one.body.data.state, 'read');
      assert.equal((await live('GET', `/v1/messages/${mine}`)).body.data.state, 'read');
    });

    it('a call that rings out: Call offer then missed, with the caller and the call id', async () => {
      const call = await control(sim, 'POST', `/users/${bruno}/call`, { to: shop });
      assert.equal(call.status, 201, JSON.stringify(call.body));
      const id = call.body.id;
      const offer = await waitForWebhook(
        receiver,
        (b) => b.type === 'Call' && b.event.callId === id && b.event.status === 'offer',
        'the Call offer webhook',
      );
      assert.deepEqual((({ timestamp: _t, ...rest }) => rest)(offer.body.event), {
        callId: id,
        from: jid(bruno),
        status: 'offer',
        isVideo: false,
        isGroup: false,
        autoRejected: false,
      });
      const ended = await control(sim, 'POST', `/users/${bruno}/calls/${id}/terminate`);
      assert.equal(ended.status, 200, JSON.stringify(ended.body));
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Call' && b.event.callId === id && b.event.status === 'missed',
        'the Call missed webhook',
      );
      const calls = await control(sim, 'GET', `/users/${bruno}/calls`);
      assert.equal(calls.body.find((c: { id: string }) => c.id === id).status, 'terminated');
    });

    it('with the automatic reject on, the caller sees the reject and gets the message', async () => {
      const set = await live('POST', '/v1/calls/settings', {
        autoReject: true,
        message: 'Busy, text me please',
      });
      assert.deepEqual(set.body, {
        success: true,
        code: 200,
        data: { autoReject: true, message: 'Busy, text me please' },
      });
      const call = await control(sim, 'POST', `/users/${bruno}/call`, { to: shop, video: true });
      assert.equal(call.status, 201, JSON.stringify(call.body));
      const id = call.body.id;
      const rejected = await waitForWebhook(
        receiver,
        (b) => b.type === 'Call' && b.event.callId === id && b.event.status === 'rejected',
        'the Call rejected webhook',
      );
      assert.equal(rejected.body.event.autoRejected, true);
      assert.equal(rejected.body.event.isVideo, true);
      const reject = await inbox(
        bruno,
        (e) => e.type === 'call-reject' && e.id === id,
        'the reject at the caller',
      );
      assert.equal(reject.from, shop);
      const calls = await control(sim, 'GET', `/users/${bruno}/calls`);
      assert.equal(calls.body.find((c: { id: string }) => c.id === id).status, 'rejected');
      const text = await inbox(
        bruno,
        (e) => e.type === 'text' && e.text === 'Busy, text me please',
        'the reject message',
      );
      assert.equal(text.from, shop);
      // The caller's phone may have the text before the send's server ack lets parley record it.
      const history = await until('the reject message in the history', async () => {
        const res = await live('GET', `/v1/chats/${bruno}/messages`);
        return res.body.data.messages.length > 0 ? res.body.data.messages : undefined;
      });
      assert.deepEqual(
        history.map((m: { fromMe: boolean; message: unknown }) => [m.fromMe, m.message]),
        [[true, { conversation: 'Busy, text me please' }]],
      );
    });

    it('POST /v1/calls/{id}/reject declines a ringing call: the caller sees the reject', async () => {
      const off = await live('POST', '/v1/calls/settings', { autoReject: false });
      assert.equal(off.status, 200, JSON.stringify(off.body));
      const call = await control(sim, 'POST', `/users/${ana}/call`, { to: shop });
      assert.equal(call.status, 201, JSON.stringify(call.body));
      const id = call.body.id;
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Call' && b.event.callId === id && b.event.status === 'offer',
        'the Call offer webhook',
      );
      const res = await live('POST', `/v1/calls/${id}/reject`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual((({ timestamp: _t, ...rest }) => rest)(res.body.data), {
        callId: id,
        from: jid(ana),
        status: 'rejected',
        isVideo: false,
        isGroup: false,
        autoRejected: false,
      });
      const reject = await inbox(
        ana,
        (e) => e.type === 'call-reject' && e.id === id,
        'the reject at the caller',
      );
      assert.equal(reject.from, shop);
      const calls = await control(sim, 'GET', `/users/${ana}/calls`);
      assert.equal(calls.body.find((c: { id: string }) => c.id === id).status, 'rejected');
      const webhook = await waitForWebhook(
        receiver,
        (b) => b.type === 'Call' && b.event.callId === id && b.event.status === 'rejected',
        'the Call rejected webhook',
      );
      assert.equal(webhook.body.event.autoRejected, false);

      const again = await live('POST', `/v1/calls/${id}/reject`);
      assert.deepEqual(again.body, {
        error: { code: 409, message: `call ${id} is no longer ringing (rejected)` },
      });
      const unknown = await live('POST', '/v1/calls/6D3F0A9C2B41E8F07A1C5D92B3E4F60A/reject');
      assert.deepEqual(unknown.body, {
        error: { code: 404, message: 'call 6D3F0A9C2B41E8F07A1C5D92B3E4F60A not found' },
      });
    });
  });
}
