/**
 * Status updates (stories) through parley's API with a live key, against the platform simulator (docs/api.md#status,
 * docs/decisions/0044-status-stories.md): Baileys relays the status to status@broadcast with its audience as
 * `statusJidList`; the simulator fans it out to the audience's phones, which decrypt it with the account's sender
 * key (text with its colour and font, an image and a video downloaded and decrypted) and show it in their status list
 * (`GET /control/users/{phone}/statuses`, docs/simulator.md); a phone viewing it sends a read receipt that reaches
 * parley as a ReadReceipt for the status. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { storedBodies } from '../messages/support.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const shop = '5531999990044';
const ana = '5531988887744';
const bia = '5531977776644';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/media/${name}`, import.meta.url));
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

for (const dialect of testDialects()) {
  describe(`live engine: status updates on the simulator (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    let textId = '';

    /** The statuses `phone`'s phone shows (its control API). */
    const statuses = async (phone: string): Promise<InboxEntry[]> => {
      const res = await control(sim, 'GET', `/users/${phone}/statuses`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    const statusAt = (phone: string, id: string) =>
      until(`status ${id} at ${phone}`, async () => (await statuses(phone)).find((e) => e.id === id));

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
        [bia, 'Bia'],
      ] as const) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      // Ana writes first, so parley knows her: the default audience.
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Hi!' });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      await until('the message is stored', async () => {
        const got = await app.live('GET', `/v1/messages/${sent.body.id}`);
        return got.status === 200 ? got : undefined;
      });
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('a text status reaches each named contact, decrypted with its colour and font', async () => {
      const res = await app.live('POST', '/v1/status/text', {
        body: 'Open until 8 pm today',
        backgroundColor: '#1E88E5',
        font: 1,
        contacts: [ana, bia],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      textId = res.body.data.id;
      assert.deepEqual(res.body.data, {
        details: 'Sent',
        id: textId,
        timestamp: res.body.data.timestamp,
        recipients: 2,
      });
      for (const phone of [ana, bia]) {
        const entry = await statusAt(phone, textId);
        assert.deepEqual(
          {
            from: entry.from,
            type: entry.type,
            text: entry.text,
            backgroundArgb: entry.backgroundArgb,
            font: entry.font,
            status: entry.status,
            group: entry.group,
          },
          {
            from: shop,
            type: 'text',
            text: 'Open until 8 pm today',
            backgroundArgb: 0xff1e88e5,
            font: 1,
            status: true,
            group: undefined,
          },
          phone,
        );
      }
      // A status is not a chat message: it is not in the contacts' chat with the shop.
      const chat = (await control(sim, 'GET', `/users/${ana}/inbox`)).body as InboxEntry[];
      assert.equal(chat.filter((e) => e.id === textId && !e.status).length, 0);
    });

    it('an image status to the default audience: the contact parley knows downloads and decrypts the file', async () => {
      const png = fixture('tiny.png');
      const res = await app.live('POST', '/v1/status/image', {
        image: `data:image/png;base64,${png.toString('base64')}`,
        caption: 'New in store',
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const { id, recipients } = res.body.data;
      assert.equal(recipients, 1);
      const entry = await statusAt(ana, id);
      assert.deepEqual(
        { type: entry.type, caption: entry.caption, mimetype: entry.mimetype, media: entry.media },
        {
          type: 'image',
          caption: 'New in store',
          mimetype: 'image/png',
          media: { sha256: sha256(png), length: png.length },
        },
      );
      assert.equal(
        (await statuses(bia)).some((e) => e.id === id),
        false,
        'Bia was not in the audience',
      );
    });

    it('a video status to named contacts: each downloads and decrypts the very file', async () => {
      const mp4 = fixture('clip.mp4');
      const res = await app.live('POST', '/v1/status/video', {
        video: `data:video/mp4;base64,${mp4.toString('base64')}`,
        caption: 'How to order',
        contacts: [ana, bia],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const { id, recipients } = res.body.data;
      assert.equal(recipients, 2);
      for (const phone of [ana, bia]) {
        const entry = await statusAt(phone, id);
        assert.deepEqual(
          { type: entry.type, caption: entry.caption, mimetype: entry.mimetype, media: entry.media },
          {
            type: 'video',
            caption: 'How to order',
            mimetype: 'video/mp4',
            media: { sha256: sha256(mp4), length: mp4.length },
          },
          phone,
        );
      }
    });

    it('a contact viewing the status reaches parley as a ReadReceipt from that contact', async () => {
      const view = await control(sim, 'POST', '/statuses/view', { phone: bia, from: shop, id: textId });
      assert.equal(view.status, 200, JSON.stringify(view.body));
      const receipt = await until('the status view recorded', async () =>
        (await storedBodies(app.t, 'ReadReceipt', app.instanceId)).find((b) =>
          b.event.messageIds.includes(textId),
        ),
      );
      assert.equal(receipt.state, 'Read');
      assert.deepEqual(receipt.event.messageSource, {
        chat: 'status@broadcast',
        sender: `${bia}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: false,
      });
      const got = await app.live('GET', `/v1/messages/${textId}`);
      assert.equal(got.body.data.state, 'read');
      assert.ok((await statusAt(bia, textId)).viewedAt, 'the phone marks the status viewed');
      const unknown = await control(sim, 'POST', '/statuses/view', { phone: bia, from: shop, id: 'NOPE' });
      assert.deepEqual(unknown.body, {
        error: { code: 404, message: `id: ${bia} has no status NOPE from ${shop}` },
      });
    });
  });
}
