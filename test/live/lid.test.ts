/**
 * LID addressing through parley's HTTP API with a live key, against the platform simulator. The platform names
 * a user who writes by LID (`<lid>@lid`) with the phone number beside it (`sender_pn`); parley's payloads and
 * stored messages carry the phone JID. A user whose phone the platform keeps private arrives by LID alone: the
 * payload then names the LID and says so (`messageSource.lidUnresolved: true`). And parley's replies, sent by
 * phone number, go to the user's LID, so they reuse the Signal session the user's first message set up: no new
 * pre-key bundle, a `msg` rather than a `pkmsg`. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, HMAC_KEY } from '../webhooks/support.ts';
import { messageRow, waitForWebhook, watchDevice } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: LID-addressed users (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5521999990000';
    const ana = '5521988887777';
    const bruno = '5521977776666';
    const hidden = '5521966665555';
    const lids: Record<string, string> = {};

    const inbox = (phone: string, predicate: (e: InboxEntry) => boolean, what: string) =>
      until(what, () => sim.context.accounts.get(phone)?.inbox.find(predicate));
    const message = (id: string) =>
      waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, `the Message ${id}`);

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      for (const [phone, pushName] of [
        [ana, 'Ana'],
        [bruno, 'Bruno'],
      ] as const) {
        lids[phone] = (await control(sim, 'POST', '/users', { phone, pushName })).body.lid;
      }
      const created = await control(sim, 'POST', '/users', {
        phone: hidden,
        pushName: 'Private',
        hidesPhone: true,
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.equal(created.body.hidesPhone, true);
      lids[hidden] = created.body.lid;
      await pairLive(sim, app, shop);
      assert.equal((await app.live('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY })).status, 200);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('a user written to by LID with its phone beside it: webhook and stored row carry the phone JID, no flag', async () => {
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Hello from Ana' });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      const { body, request } = await message(sent.body.id);
      assertSigned(request);
      assert.deepEqual(body.event.info.messageSource, {
        chat: `${ana}@s.whatsapp.net`,
        sender: `${ana}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: false,
      });
      assert.equal(body.event.info.pushName, 'Ana');
      const row = await until('the stored message', () => messageRow(app, sent.body.id));
      assert.deepEqual(
        [row.chat, row.sender, row.state],
        [`${ana}@s.whatsapp.net`, `${ana}@s.whatsapp.net`, 'delivered'],
      );
    });

    it('a user whose phone the platform hides arrives by LID alone: the payload names the LID and flags it', async () => {
      const sent = await control(sim, 'POST', '/messages', { from: hidden, to: shop, text: 'Who am I?' });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      const { body } = await message(sent.body.id);
      const lid = `${lids[hidden]}@lid`;
      assert.deepEqual(body.event.info.messageSource, {
        chat: lid,
        sender: lid,
        isFromMe: false,
        isGroup: false,
        lidUnresolved: true,
      });
      assert.equal(body.event.info.pushName, 'Private');
      assert.equal(body.event.message.conversation, 'Who am I?');
      const row = await until('the stored message', () => messageRow(app, sent.body.id));
      assert.deepEqual([row.chat, row.sender], [lid, lid]);
      // Nothing in the payload gives the phone number away.
      assert.equal(JSON.stringify(body).includes(hidden), false);

      // Its typing is reported the same way.
      const typing = await control(sim, 'POST', '/presence', { from: hidden, to: shop, state: 'composing' });
      assert.equal(typing.status, 200, JSON.stringify(typing.body));
      const presence = await waitForWebhook(receiver, (b) => b.type === 'ChatPresence', 'the ChatPresence');
      assert.deepEqual(presence.body.event, {
        messageSource: { chat: lid, sender: lid, isFromMe: false, isGroup: false, lidUnresolved: true },
        state: 'composing',
        media: '',
      });
    });

    it("parley's reply by phone number goes to the user's LID: the session the user's pkmsg set up is reused", async () => {
      const watch = watchDevice(sim, shop);
      try {
        const first = await control(sim, 'POST', '/messages', {
          from: bruno,
          to: shop,
          text: 'First contact',
        });
        await message(first.body.id);
        const reply = await app.live('POST', '/v1/messages/send', {
          phone: bruno,
          body: 'Welcome, Bruno!',
          id: first.body.id,
        });
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        const stanza = await watch.message(reply.body.data.id);
        const toBruno = stanza.encs.filter(
          (e) => e.jid.startsWith(`${lids[bruno]}`) || e.jid.startsWith(bruno),
        );
        assert.deepEqual(
          toBruno.map((e) => [e.jid, e.type]),
          [[`${lids[bruno]}@lid`, 'msg']],
          "one whisper message to the user's phone, on the session its first message set up",
        );
        assert.deepEqual(
          watch.fetchesFor(bruno, lids[bruno] ?? ''),
          [],
          'no pre-key bundle fetched for the user',
        );
        const entry = await inbox(bruno, (e) => e.id === reply.body.data.id, 'the reply in the inbox');
        assert.deepEqual(
          [entry.type, entry.text, entry.quotedId, entry.from],
          ['text', 'Welcome, Bruno!', first.body.id, shop],
        );
        // The stored message and its payload name the chat by phone JID all the same.
        const own = await message(reply.body.data.id);
        assert.deepEqual(own.body.event.info.messageSource, {
          chat: `${bruno}@s.whatsapp.net`,
          sender: `${shop}@s.whatsapp.net`,
          isFromMe: true,
          isGroup: false,
        });

        const react = await app.live('POST', '/v1/messages/react', {
          phone: bruno,
          id: first.body.id,
          body: '👍',
        });
        assert.equal(react.status, 200, JSON.stringify(react.body));
        assert.deepEqual(react.body.data.id, first.body.id);
        const reaction = await inbox(bruno, (e) => e.type === 'reaction', 'the reaction in the inbox');
        assert.deepEqual(reaction.reaction, { id: first.body.id, text: '👍' });
        const read = await app.live('POST', '/v1/messages/read', { id: [first.body.id], chatPhone: bruno });
        assert.deepEqual(read.body, { success: true, code: 200, data: { details: 'Marked as read' } });
        const receipt = await inbox(
          bruno,
          (e) => e.type === 'receipt' && e.receipt === 'read' && (e.ids ?? []).includes(first.body.id),
          'the read receipt',
        );
        assert.equal(receipt.from, shop);
        assert.deepEqual(watch.fetchesFor(bruno, lids[bruno] ?? ''), [], 'still no pre-key bundle fetched');
      } finally {
        watch.stop();
      }
    });

    it("after Baileys' device list cache expires (5 min of parley's clock), a send still reuses the session", async () => {
      const watch = watchDevice(sim, shop);
      try {
        app.t.clock.advance(6 * 60_000);
        const sent = await app.live('POST', '/v1/messages/send', { phone: bruno, body: 'Still there?' });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        const stanza = await watch.message(sent.body.data.id);
        assert.deepEqual(
          stanza.encs.filter((e) => e.jid.startsWith(`${lids[bruno]}`)).map((e) => [e.jid, e.type]),
          [[`${lids[bruno]}@lid`, 'msg']],
        );
        // The cache had expired: the device list was asked for again, by LID, and the session kept.
        assert.deepEqual(
          watch.deviceQueries().filter((jid) => jid.startsWith(`${lids[bruno]}`) || jid.startsWith(bruno)),
          [`${lids[bruno]}@lid`],
        );
        assert.deepEqual(watch.fetchesFor(bruno, lids[bruno] ?? ''), [], 'no pre-key bundle fetched');
        const entry = await inbox(bruno, (e) => e.id === sent.body.data.id, 'the text in the inbox');
        assert.equal(entry.text, 'Still there?');
      } finally {
        watch.stop();
      }
    });
  });
}
