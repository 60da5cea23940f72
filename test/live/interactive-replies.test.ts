/**
 * Replies to interactive messages on a live key against the platform simulator
 * (docs/decisions/0110-interactive-replies.md): a simulated user answers reply buttons, a list, a template button and a
 * flow (`POST /control/interactive-reply`, the platform's buttonsResponseMessage, listResponseMessage,
 * templateButtonReplyMessage and interactiveResponseMessage, Signal-encrypted to the linked device), Baileys
 * decrypts each over the real socket, and parley reports a Message webhook whose `conversation` is the text shown and
 * whose platform-named member carries the pick, quoting the business's message; the stored message reads back as
 * kind `interactive_reply`. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const shop = '5541999990000';
const ana = '5541988887777';

for (const dialect of testDialects()) {
  describe(`live engine: replies to interactive messages against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    let asked: string;
    const live = (method: 'GET' | 'POST', url: string, body?: unknown) => app.live(method, url, body);

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
      ]) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      assert.equal((await live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      const subscribed = await live('POST', '/v1/session/connect', { subscribe: ['Message'] });
      assert.equal(subscribed.status, 200, JSON.stringify(subscribed.body));
      // The message Ana answers: parley cannot send interactive messages, so any message of the shop stands for it.
      const sent = await live('POST', '/v1/messages/send', {
        phone: ana,
        body: 'Confirm your booking for 4?',
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      asked = sent.body.data.id;
      await until('Ana received the question', () =>
        sim.context.accounts.get(ana)?.inbox.find((e) => e.id === asked),
      );
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    const cases = () => [
      {
        request: { type: 'buttons', text: 'Yes, confirm', selectedId: 'confirm-42' },
        message: {
          conversation: 'Yes, confirm',
          buttonsResponseMessage: { selectedButtonId: 'confirm-42', selectedDisplayText: 'Yes, confirm' },
          contextInfo: { stanzaId: asked },
        },
      },
      {
        request: { type: 'list', text: 'Large pizza', selectedId: 'pizza-l', description: '35 cm, 8 slices' },
        message: {
          conversation: 'Large pizza',
          listResponseMessage: {
            title: 'Large pizza',
            singleSelectReply: { selectedRowId: 'pizza-l' },
            description: '35 cm, 8 slices',
          },
          contextInfo: { stanzaId: asked },
        },
      },
      {
        request: { type: 'template', text: 'Stop promotions', selectedId: 'stop-promos', selectedIndex: 1 },
        message: {
          conversation: 'Stop promotions',
          templateButtonReplyMessage: {
            selectedId: 'stop-promos',
            selectedDisplayText: 'Stop promotions',
            selectedIndex: 1,
          },
          contextInfo: { stanzaId: asked },
        },
      },
      {
        request: {
          type: 'flow',
          text: 'Sent',
          flowName: 'booking_flow',
          paramsJson: '{"date":"2026-01-20","people":"4"}',
          flowVersion: 3,
        },
        message: {
          conversation: 'Sent',
          interactiveResponseMessage: {
            body: { text: 'Sent' },
            nativeFlowResponseMessage: {
              name: 'booking_flow',
              paramsJson: '{"date":"2026-01-20","people":"4"}',
              version: 3,
            },
          },
          contextInfo: { stanzaId: asked },
        },
      },
    ];

    it('each answer arrives as a Message webhook with the pick and is stored as kind interactive_reply', async () => {
      for (const { request, message } of cases()) {
        const answered = await control(sim, 'POST', '/interactive-reply', {
          from: ana,
          to: shop,
          quotedId: asked,
          ...request,
        });
        assert.equal(answered.status, 201, JSON.stringify(answered.body));
        const id: string = answered.body.id;
        const webhook = await waitForWebhook(
          receiver,
          (b) => b.type === 'Message' && b.event.info.id === id,
          `the ${request.type} answer's webhook`,
        );
        assert.deepEqual(webhook.body.event.message, message, request.type);
        assert.deepEqual(webhook.body.event.info.messageSource, {
          chat: `${ana}@s.whatsapp.net`,
          sender: `${ana}@s.whatsapp.net`,
          isFromMe: false,
          isGroup: false,
        });
        const stored = await live('GET', `/v1/messages/${id}`);
        assert.equal(stored.status, 200, JSON.stringify(stored.body));
        assert.equal(stored.body.data.kind, 'interactive_reply', request.type);
        assert.deepEqual(stored.body.data.message, message, request.type);
      }
    });

    it('the simulator refuses a field the answer type does not take, and a missing id', async () => {
      const wrong = await control(sim, 'POST', '/interactive-reply', {
        from: ana,
        to: shop,
        type: 'buttons',
        text: 'Yes',
        selectedId: 'y',
        selectedIndex: 0,
      });
      assert.equal(wrong.status, 400, JSON.stringify(wrong.body));
      assert.match(JSON.stringify(wrong.body), /selectedIndex: not allowed for type \\"buttons\\"/);
      const missing = await control(sim, 'POST', '/interactive-reply', {
        from: ana,
        to: shop,
        type: 'list',
        text: 'x',
      });
      assert.equal(missing.status, 400, JSON.stringify(missing.body));
      assert.match(JSON.stringify(missing.body), /selectedId: required for type \\"list\\"/);
    });
  });
}
