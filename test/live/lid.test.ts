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

    // docs/decisions/0038-lid-mappings.md: the pairs parley saw answer GET /v1/contacts/lid, and sends take <lid>@lid.
    const mappingRows = () =>
      app.t.services.store.db
        .selectFrom('lid_mappings')
        .select(['lid', 'phone'])
        .where('instance_id', '=', app.instanceId)
        .orderBy('lid')
        .execute();

    it('the pair an incoming LID-addressed message carried is stored and answers GET /v1/contacts/lid', async () => {
      const lid = lids[ana] ?? '';
      await until('the stored pair of Ana', async () =>
        (await mappingRows()).find((r) => r.lid === lid && r.phone === ana),
      );
      for (const query of [`lid=${lid}`, `lid=${lid}@lid`, `phone=${ana}`]) {
        const res = await app.live('GET', `/v1/contacts/lid?${query}`);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.deepEqual(res.body, { success: true, code: 200, data: { phone: ana, lid: `${lid}@lid` } });
      }
      // The user whose phone the platform hides: nothing, here or in Baileys' store, knows the number.
      const hiddenLid = lids[hidden] ?? '';
      const unknown = await app.live('GET', `/v1/contacts/lid?lid=${hiddenLid}`);
      assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
      assert.deepEqual(unknown.body, {
        error: { code: 404, message: `no LID mapping known for ${hiddenLid}@lid` },
      });
      assert.equal(
        (await mappingRows()).some((r) => r.lid === hiddenLid),
        false,
      );
    });

    it("a number parley never saw is asked of the platform through Baileys' mapping store, answered and stored", async () => {
      const dora = '5521955554444';
      const created = await control(sim, 'POST', '/users', { phone: dora, pushName: 'Dora' });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const doraLid: string = created.body.lid;
      assert.equal(
        (await mappingRows()).some((r) => r.phone === dora),
        false,
      );
      const res = await app.live('GET', `/v1/contacts/lid?phone=${dora}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body.data, { phone: dora, lid: `${doraLid}@lid` });
      assert.deepEqual(
        (await mappingRows()).filter((r) => r.phone === dora),
        [{ lid: doraLid, phone: dora }],
      );
      const byLid = await app.live('GET', `/v1/contacts/lid?lid=${doraLid}@lid`);
      assert.deepEqual(byLid.body.data, { phone: dora, lid: `${doraLid}@lid` });
    });

    it('a send to <lid>@lid reaches the simulated user: by its phone JID when known, flagged by LID otherwise', async () => {
      const hiddenLid = `${lids[hidden]}@lid`;
      const toHidden = await app.live('POST', '/v1/messages/send', {
        phone: hiddenLid,
        body: 'Hello, private',
      });
      assert.equal(toHidden.status, 200, JSON.stringify(toHidden.body));
      const entry = await inbox(hidden, (e) => e.id === toHidden.body.data.id, 'the text in the inbox');
      assert.deepEqual([entry.type, entry.text, entry.from], ['text', 'Hello, private', shop]);
      const own = await message(toHidden.body.data.id);
      assert.deepEqual(own.body.event.info.messageSource, {
        chat: hiddenLid,
        sender: `${shop}@s.whatsapp.net`,
        isFromMe: true,
        isGroup: false,
        lidUnresolved: true,
      });
      const hiddenRow = await until('the stored message', () => messageRow(app, toHidden.body.data.id));
      assert.deepEqual([hiddenRow.chat, hiddenRow.state], [hiddenLid, 'sent']);

      const toAna = await app.live('POST', '/v1/messages/send', {
        phone: `${lids[ana]}@lid`,
        body: 'Hi Ana',
      });
      assert.equal(toAna.status, 200, JSON.stringify(toAna.body));
      const anaEntry = await inbox(ana, (e) => e.id === toAna.body.data.id, "the text in Ana's inbox");
      assert.deepEqual([anaEntry.type, anaEntry.text, anaEntry.from], ['text', 'Hi Ana', shop]);
      const anaRow = await until('the stored message', () => messageRow(app, toAna.body.data.id));
      assert.equal(anaRow.chat, `${ana}@s.whatsapp.net`);

      const bad = await app.live('POST', '/v1/messages/send', { phone: 'abc@lid', body: 'x' });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, {
        error: { code: 400, message: 'phone must be digits only, international format, no leading +' },
      });
    });

    it('a chat GET /v1/chats lists under its LID is read, labelled and acted on by that JID', async () => {
      const hiddenLid = `${lids[hidden]}@lid`;
      const sent = await control(sim, 'POST', '/messages', { from: hidden, to: shop, text: 'Who am I?' });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      const row = await until('the stored message', () => messageRow(app, sent.body.id));
      assert.equal(row.chat, hiddenLid);
      const chats = await app.live('GET', '/v1/chats');
      assert.ok(
        chats.body.data.chats.some((c: { jid: string }) => c.jid === hiddenLid),
        JSON.stringify(chats.body),
      );
      const history = await app.live('GET', `/v1/chats/${encodeURIComponent(hiddenLid)}/messages`);
      assert.equal(history.status, 200, JSON.stringify(history.body));
      assert.ok(
        history.body.data.messages.some((m: { id: string }) => m.id === sent.body.id),
        JSON.stringify(history.body),
      );
      assert.ok(history.body.data.messages.every((m: { chat: string }) => m.chat === hiddenLid));
      const labels = await app.live('GET', `/v1/chats/${encodeURIComponent(hiddenLid)}/labels`);
      assert.equal(labels.status, 200, JSON.stringify(labels.body));
      const archive = await app.live('POST', `/v1/chats/${encodeURIComponent(hiddenLid)}/archive`);
      assert.equal(archive.status, 200, JSON.stringify(archive.body));
    });

    it('a read receipt naming a known user by <lid>@lid moves the received message to read', async () => {
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Leu?' });
      const row = await until('the stored message', () => messageRow(app, sent.body.id));
      assert.equal(row.chat, `${ana}@s.whatsapp.net`);
      const read = await app.live('POST', '/v1/messages/read', {
        id: [sent.body.id],
        chatPhone: `${lids[ana]}@lid`,
      });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const stored = await app.live('GET', `/v1/messages/${sent.body.id}`);
      assert.equal(stored.body.data.state, 'read', JSON.stringify(stored.body));
    });
  });
}
