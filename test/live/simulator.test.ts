/**
 * parley's HTTP API with a live key, end to end against the platform simulator: the live engine (Baileys'
 * own makeWASocket over a real WebSocket) pairs, logs in, exchanges Signal-encrypted messages with simulated
 * users, reports their receipts and chat state as signed webhooks, disconnects, reconnects without a scan and
 * logs out. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, bodies, HMAC_KEY } from '../webhooks/support.ts';
import { control, type LiveApp, liveApp, startTestSimulator, until } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine through parley's API against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5511999990000';
    const ana = '5511988887777';

    const live = (method: 'GET' | 'POST', url: string, body?: unknown) => app.live(method, url, body);
    const status = () => app.status();
    const inbox = (predicate: (e: InboxEntry) => boolean, what: string) =>
      until(what, () => sim.context.accounts.get(ana)?.inbox.find(predicate));
    const webhook = (predicate: (b: any) => boolean, what: string) =>
      until(what, () => {
        const index = bodies(receiver.requests).findIndex(predicate);
        return index < 0
          ? undefined
          : { body: bodies(receiver.requests)[index], request: receiver.requests[index] };
      });

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('connect → QR from a simulator ref → scan → connected, logged in with the account JID', async () => {
      const connect = await live('POST', '/v1/session/connect');
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      const qr = await live('GET', '/v1/session/qr');
      assert.equal(qr.status, 200, JSON.stringify(qr.body));
      const code: string = qr.body.data.code;
      assert.match(code, /#2@/);
      const scan = await control(sim, 'POST', '/scan', { code, phone: shop });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      const state = await until('logged in', async () => {
        const s = await status();
        return s.connected && s.loggedIn ? s : undefined;
      });
      assert.equal(state.jid, `${shop}:1@s.whatsapp.net`);
      const account = await control(sim, 'GET', `/accounts/${shop}`);
      assert.deepEqual(account.body.devices, [
        { id: 0, linked: true, sockets: 0 },
        { id: 1, linked: true, sockets: 1 },
      ]);
      assert.equal((await live('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY })).status, 200);
      assert.equal((await live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });

    it('a user writes: a signed Message webhook with phone JIDs, pushName and ISO time; parley replies, the user decrypts it', async () => {
      const sent = await control(sim, 'POST', '/messages', {
        from: ana,
        to: shop,
        text: 'Is my order ready?',
      });
      assert.equal(sent.status, 201);
      const { body, request } = await webhook(
        (b) => b.type === 'Message' && b.event.info.id === sent.body.id,
        'the Message webhook',
      );
      assert.ok(request);
      assertSigned(request);
      assert.deepEqual(body.event.info.messageSource, {
        chat: `${ana}@s.whatsapp.net`,
        sender: `${ana}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: false,
      });
      assert.equal(body.event.info.pushName, 'Ana');
      assert.match(body.event.info.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/);
      assert.equal(body.event.message.conversation, 'Is my order ready?');

      const reply = await live('POST', '/v1/messages/send', {
        phone: ana,
        body: 'Yes, it ships today.',
        id: sent.body.id,
      });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const entry = await inbox((e) => e.id === reply.body.data.id, 'the reply in the inbox');
      assert.equal(entry.text, 'Yes, it ships today.');
      assert.equal(entry.quotedId, sent.body.id);
      assert.equal(entry.from, shop);
    });

    it('react (received and own) and mark read reach the user; its receipts and chat state come back as webhooks', async () => {
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Thanks!' });
      await webhook((b) => b.type === 'Message' && b.event.info.id === sent.body.id, 'the Message webhook');
      const react = await live('POST', '/v1/messages/react', { phone: ana, id: sent.body.id, body: '👍' });
      assert.equal(react.status, 200, JSON.stringify(react.body));
      assert.deepEqual(
        (await inbox((e) => e.type === 'reaction' && e.reaction?.id === sent.body.id, 'the reaction'))
          .reaction,
        {
          id: sent.body.id,
          text: '👍',
        },
      );
      const own = await live('POST', '/v1/messages/send', { phone: ana, body: 'One more thing' });
      const ownId: string = own.body.data.id;
      await inbox((e) => e.id === ownId, 'the own message');
      assert.equal(
        (await live('POST', '/v1/messages/react', { phone: ana, id: `me:${ownId}`, body: '❤️' })).status,
        200,
      );
      await inbox(
        (e) => e.type === 'reaction' && e.reaction?.id === ownId,
        'the reaction to the own message',
      );

      const read = await live('POST', '/v1/messages/read', { id: [sent.body.id], chatPhone: ana });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const receipt = await inbox(
        (e) => e.type === 'receipt' && e.receipt === 'read' && (e.ids ?? []).includes(sent.body.id),
        'the read receipt',
      );
      assert.equal(receipt.from, shop);

      assert.equal(
        (await control(sim, 'POST', '/receipts', { from: ana, to: shop, ids: [ownId], type: 'read' })).status,
        200,
      );
      const readReceipt = await webhook(
        (b) => b.type === 'ReadReceipt' && b.event.messageIds.includes(ownId),
        'ReadReceipt',
      );
      assert.equal(readReceipt.body.state, 'Read');
      assert.equal(
        (await control(sim, 'POST', '/presence', { from: ana, to: shop, state: 'recording' })).status,
        200,
      );
      const presence = await webhook((b) => b.type === 'ChatPresence', 'ChatPresence');
      assert.equal(presence.body.event.state, 'composing');
      assert.equal(presence.body.event.media, 'audio');
    });

    it('disconnect keeps the session (false, true); connect again logs in without a scan and messages flow', async () => {
      assert.equal((await live('POST', '/v1/session/disconnect')).status, 200);
      const down = await status();
      assert.deepEqual([down.connected, down.loggedIn], [false, true]);
      await until('the socket closed at the simulator', async () => {
        const account = await control(sim, 'GET', `/accounts/${shop}`);
        return account.body.devices[1].sockets === 0 ? true : undefined;
      });
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Are you there?' });
      assert.equal(sent.body.online, 0);
      assert.equal((await live('POST', '/v1/session/connect')).status, 200);
      await until('logged in again', async () => {
        const s = await status();
        return s.connected && s.loggedIn ? true : undefined;
      });
      await webhook(
        (b) => b.type === 'Message' && b.event.info.id === sent.body.id,
        'the offline message as a webhook',
      );
    });

    it('logout: (false, false) and the simulator sees the device removed', async () => {
      assert.equal((await live('POST', '/v1/session/logout')).status, 200);
      const s = await status();
      assert.deepEqual([s.connected, s.loggedIn], [false, false]);
      await until('the device unlinked', async () => {
        const account = await control(sim, 'GET', `/accounts/${shop}`);
        return account.body.devices[1].linked === false ? true : undefined;
      });
    });
  });
}
