/**
 * POST /v1/messages/forward with a live key against the platform simulator: a simulated user's text and image are
 * forwarded to another simulated user, whose phone decrypts them marked forwarded (contextInfo.isForwarded,
 * forwardingScore 1) with the same text, caption and file bytes; the account's own message goes out unmarked
 * (score 0, as Baileys' generateForwardMessageContent). Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is
 * set.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const shop = '5541999990000';
const ana = '5541988887777';
const bia = '5541977776666';
const jpeg = readFileSync(new URL('../fixtures/media/tiny.jpg', import.meta.url));

for (const dialect of testDialects()) {
  describe(`live engine: forwarding messages against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const received = (phone: string, what: string, match: (entry: InboxEntry) => boolean) =>
      until(what, () => sim.context.accounts.get(phone)?.inbox.find(match));
    /** The id of the Message webhook of a message Ana sent the account. */
    const arrived = async (id: string) =>
      waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, `message ${id}`);

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
        [bia, 'Bia'],
      ]) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it("Ana's text reaches Bia marked forwarded (score 1); parley stores the forward as such", async () => {
      const wrote = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Meet at 5?' });
      assert.equal(wrote.status, 201, JSON.stringify(wrote.body));
      await arrived(wrote.body.id);
      const res = await app.live('POST', '/v1/messages/forward', { phone: bia, messageId: wrote.body.id });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id = res.body.data.id;
      assert.equal(res.body.data.details, 'Sent');
      const entry = await received(bia, 'the forward at Bia', (e) => e.id === id);
      assert.equal(entry.type, 'text');
      assert.equal(entry.text, 'Meet at 5?');
      assert.equal(entry.from, shop);
      assert.equal(entry.forwardingScore, 1);
      const stored = await app.live('GET', `/v1/messages/${id}`);
      assert.deepEqual(stored.body.data.message, {
        conversation: 'Meet at 5?',
        contextInfo: { isForwarded: true, forwardingScore: 1 },
      });
    });

    it("Ana's image reaches Bia forwarded with the same bytes and caption", async () => {
      const sent = await control(sim, 'POST', '/media', {
        from: ana,
        to: shop,
        kind: 'image',
        data: jpeg.toString('base64'),
        caption: 'Broken part',
      });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      await arrived(sent.body.id);
      const res = await app.live('POST', '/v1/messages/forward', { phone: bia, messageId: sent.body.id });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id = res.body.data.id;
      const entry = await received(bia, 'the forwarded image at Bia', (e) => e.id === id && 'media' in e);
      assert.equal(entry.type, 'image');
      assert.equal(entry.caption, 'Broken part');
      assert.equal(entry.forwardingScore, 1);
      assert.deepEqual(entry.media, {
        sha256: createHash('sha256').update(jpeg).digest('hex'),
        length: jpeg.length,
      });
    });

    it("the account's own message goes out unmarked; unknown ids are 404s", async () => {
      const mine = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'See you there' });
      assert.equal(mine.status, 200, JSON.stringify(mine.body));
      const res = await app.live('POST', '/v1/messages/forward', {
        phone: bia,
        messageId: mine.body.data.id,
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const entry = await received(bia, 'the copy at Bia', (e) => e.id === res.body.data.id);
      assert.equal(entry.text, 'See you there');
      assert.equal(entry.forwardingScore, undefined);
      const unknown = await app.live('POST', '/v1/messages/forward', {
        phone: bia,
        messageId: '3EB0000000000000000000',
      });
      assert.deepEqual(unknown.body, { error: { code: 404, message: 'message not found' } });
    });
  });
}
