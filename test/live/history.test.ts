/**
 * History sync on first login through parley's HTTP API with a live key, against the platform simulator: the
 * account's past conversations (`POST /control/history`) travel inline in the phone's INITIAL_BOOTSTRAP history
 * notification (a HistorySync protobuf, zlib-deflated, as Baileys' Utils/history.js reads it), keyed by the
 * peers' LIDs with their phone numbers beside them. parley reports them as one `HistorySync` webhook with phone
 * JIDs (a peer whose phone the platform hides keeps its LID, flagged), stores every message with its delivery
 * state, and lists the peers as contacts with the names the account saved. Runs on SQLite, and on PostgreSQL
 * when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, HMAC_KEY } from '../webhooks/support.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

interface Seeded {
  with: string;
  name: string;
  messages: { id: string; fromMe: boolean; text: string; timestamp: string }[];
}

for (const dialect of testDialects()) {
  describe(`live engine: history sync on first login (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990000';
    const ana = '5541988887777';
    const bruno = '5541977776666';
    const hidden = '5541966665555';
    let hiddenLid = '';
    let seeded: Seeded[] = [];

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await control(sim, 'POST', '/users', { phone: bruno, pushName: 'Bruno' });
      hiddenLid = (
        await control(sim, 'POST', '/users', { phone: hidden, pushName: 'Private', hidesPhone: true })
      ).body.lid;
      const history = await control(sim, 'POST', '/history', {
        phone: shop,
        chats: [
          {
            with: ana,
            name: 'Ana Souza',
            messages: [
              { fromMe: false, text: 'Is the shop open on Sunday?', timestamp: '2026-01-10T10:00:00Z' },
              { fromMe: true, text: 'Yes, from 9 to 13.', timestamp: '2026-01-10T10:01:00Z' },
            ],
          },
          {
            with: bruno,
            messages: [{ fromMe: true, text: 'Your parcel left today.', timestamp: '2026-01-09T08:30:00Z' }],
          },
          {
            with: hidden,
            messages: [{ fromMe: false, text: 'Do you ship abroad?', timestamp: '2026-01-08T18:00:00Z' }],
          },
        ],
      });
      assert.equal(history.status, 200, JSON.stringify(history.body));
      seeded = history.body.chats;
      assert.equal((await app.live('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY })).status, 200);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('the control API answers the history with ids, oldest first', () => {
      assert.deepEqual(
        seeded.map((c) => [c.with, c.name, c.messages.map((m) => [m.fromMe, m.text, m.timestamp])]),
        [
          [
            ana,
            'Ana Souza',
            [
              [false, 'Is the shop open on Sunday?', '2026-01-10T10:00:00.000Z'],
              [true, 'Yes, from 9 to 13.', '2026-01-10T10:01:00.000Z'],
            ],
          ],
          [bruno, '', [[true, 'Your parcel left today.', '2026-01-09T08:30:00.000Z']]],
          [hidden, '', [[false, 'Do you ship abroad?', '2026-01-08T18:00:00.000Z']]],
        ],
      );
      for (const chat of seeded) for (const m of chat.messages) assert.match(m.id, /^[0-9A-F]{32}$/);
    });

    it('one HistorySync webhook carries every chat and message, with phone JIDs', async () => {
      const { body, request } = await waitForWebhook(
        receiver,
        (b) => b.type === 'HistorySync' && b.event.chats.length > 0,
        'the HistorySync webhook',
      );
      assertSigned(request);
      const [anaChat, brunoChat, hiddenChat] = seeded;
      assert.ok(anaChat && brunoChat && hiddenChat);
      const source = (peer: string, fromMe: boolean) => ({
        chat: `${peer}@s.whatsapp.net`,
        sender: fromMe ? `${shop}@s.whatsapp.net` : `${peer}@s.whatsapp.net`,
        isFromMe: fromMe,
        isGroup: false,
      });
      // Messages newest first, as the platform orders a conversation.
      const messages = (chat: Seeded, info: (m: Seeded['messages'][number]) => object) =>
        [...chat.messages].reverse().map((m) => ({
          info: { id: m.id, ...info(m), timestamp: m.timestamp },
          message: { conversation: m.text },
        }));
      const lid = `${hiddenLid}@lid`;
      assert.deepEqual(body.event, {
        syncType: 'INITIAL_BOOTSTRAP',
        progress: 100,
        chats: [
          {
            jid: `${ana}@s.whatsapp.net`,
            name: 'Ana Souza',
            messages: messages(anaChat, (m) => ({
              messageSource: source(ana, m.fromMe),
              pushName: m.fromMe ? 'Shop' : 'Ana',
            })),
          },
          {
            jid: `${bruno}@s.whatsapp.net`,
            name: '',
            messages: messages(brunoChat, () => ({ messageSource: source(bruno, true), pushName: 'Shop' })),
          },
          {
            jid: lid,
            name: '',
            messages: messages(hiddenChat, () => ({
              messageSource: { chat: lid, sender: lid, isFromMe: false, isGroup: false, lidUnresolved: true },
              pushName: 'Private',
            })),
          },
        ],
      });
      assert.deepEqual(Object.keys(body).sort(), ['event', 'instanceId', 'sequence', 'type']);
    });

    it('every synced message is stored: sent for own messages, delivered for received ones', async () => {
      const expected = seeded.flatMap((chat) =>
        chat.messages.map((m) => {
          const peer = chat.with === hidden ? `${hiddenLid}@lid` : `${chat.with}@s.whatsapp.net`;
          return [
            m.id,
            peer,
            m.fromMe ? `${shop}@s.whatsapp.net` : peer,
            m.fromMe ? 'sent' : 'delivered',
            m.text,
            m.timestamp,
          ];
        }),
      );
      const rows = [];
      for (const [id] of expected) {
        const row = await messageRow(app, String(id));
        assert.ok(row, `message ${id} stored`);
        rows.push([
          row.id,
          row.chat,
          row.sender,
          row.state,
          JSON.parse(row.content).text,
          new Date(row.timestamp).toISOString(),
        ]);
      }
      assert.deepEqual(rows, expected);
    });

    it('the contacts list holds the peers, with the names the account saved', async () => {
      // The contacts of a history chunk are stored right after its event is recorded: wait for them.
      const list = await until('the contacts of the history', async () => {
        const response = await app.live('GET', '/v1/contacts/list');
        const data = response.body.data ?? {};
        return data[`${ana}@s.whatsapp.net`]?.fullName && data[`${hiddenLid}@lid`] ? response : undefined;
      });
      const entry = (names: Partial<{ firstName: string; fullName: string; pushName: string }>) => ({
        businessName: '',
        firstName: '',
        fullName: '',
        pushName: '',
        found: true,
        ...names,
      });
      // A peer whose phone is hidden is listed under its LID, the only address the account has for it.
      assert.deepEqual(list.body, {
        success: true,
        code: 200,
        data: {
          [`${hiddenLid}@lid`]: entry({}),
          [`${bruno}@s.whatsapp.net`]: entry({}),
          [`${ana}@s.whatsapp.net`]: entry({ firstName: 'Ana', fullName: 'Ana Souza', pushName: 'Ana' }),
        },
      });
    });
  });
}
