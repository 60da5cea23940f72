/**
 * Media, locations and contact cards through parley's HTTP API with a live key, end to end against the platform
 * simulator: Baileys (the live engine) encrypts and uploads each file to the simulator's HTTPS media server
 * (trusted through PLATFORM_CA_FILE), the simulated recipient downloads it, verifies its hashes and MAC,
 * decrypts it, and the test compares the decrypted bytes by hash and every metadata field exactly — once through
 * /v1/messages/send/{kind} and once through its gateway twin /chat/send/{kind} (signed,
 * docs/decisions/0021-gateway-form.md). A simulated user's media, locations and contact cards come back to parley as
 * Message webhooks. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import webpmux from 'node-webpmux';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { ffmpegAvailable } from '../support/ffmpeg.ts';
import { pixelFramesGif } from '../support/gif.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, bodies, HMAC_KEY } from '../webhooks/support.ts';
import { CASES, dataUri, decrypted, fixture, VCARD } from './media-cases.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

/** The fields of `entry` that `expected` names (so the comparison is exact on those, blind to id/timestamp). */
function pick(entry: InboxEntry, expected: Partial<InboxEntry>): Partial<InboxEntry> {
  return Object.fromEntries(Object.keys(expected).map((key) => [key, entry[key as keyof InboxEntry]]));
}

for (const dialect of testDialects()) {
  describe(`media, locations and contact cards through the live API against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5511999990000';
    const ana = '5511988887777';
    /** What the recipient's phone decrypted, by message id (the simulator's `media` events). */
    const plaintexts = new Map<string, Buffer>();

    const received = (id: string, what: string) =>
      until(what, () => sim.context.accounts.get(ana)?.inbox.find((e) => e.id === id));
    /** POST through the gateway form (docs/decisions/0021-gateway-form.md), signed with the instance's HMAC key. */
    const gateway = (path: string, body: unknown) => {
      const raw = JSON.stringify(body);
      const timestamp = String(Math.floor(app.t.clock() / 1000));
      const signature = createHmac('sha256', HMAC_KEY)
        .update(`${timestamp}.POST.${path}.${raw}`)
        .digest('hex');
      return app.t.call('POST', path, raw, {
        authorization: `Bearer ${app.liveKey}`,
        'content-type': 'application/json',
        'x-instance-id': app.instanceId,
        'x-timestamp': timestamp,
        'x-signature': signature,
      });
    };

    before(async () => {
      sim = await startTestSimulator();
      sim.context.events.on('media', ({ entry, plaintext }: { entry: InboxEntry; plaintext: Buffer }) =>
        plaintexts.set(entry.id, plaintext),
      );
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await pairLive(sim, app, shop);
      assert.equal((await app.live('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY })).status, 200);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    for (const { kind, body, expected } of CASES) {
      it(`send/${kind} (v1 and gateway): the recipient decrypts exactly what was sent`, async () => {
        const want = await expected();
        const v1 = await app.live('POST', `/v1/messages/send/${kind}`, { phone: ana, ...body });
        assert.equal(v1.status, 200, JSON.stringify(v1.body));
        assert.equal(v1.body.data.details, 'Sent');
        const viaV1 = await received(v1.body.data.id, `the ${kind} sent through /v1 in the inbox`);
        assert.deepEqual(pick(viaV1, want), want);
        assert.equal(viaV1.from, shop);

        const gw = await gateway(`/chat/send/${kind}`, { phone: ana, ...body });
        assert.equal(gw.status, 200, JSON.stringify(gw.body));
        assert.notEqual(gw.body.data.id, v1.body.data.id);
        const viaGateway = await received(
          gw.body.data.id,
          `the ${kind} sent through the gateway in the inbox`,
        );
        assert.deepEqual(pick(viaGateway, want), want);

        // The control API serves the decrypted bytes of media messages (downloaded and verified again).
        const file = await fetch(`${sim.control}/users/${ana}/inbox/${v1.body.data.id}/media`);
        if (want.media) {
          assert.equal(file.status, 200);
          assert.equal(file.headers.get('content-type'), want.mimetype);
          assert.deepEqual(decrypted(Buffer.from(await file.arrayBuffer())), want.media);
        } else {
          assert.deepEqual(
            [file.status, await file.json()],
            [
              404,
              {
                error: {
                  code: 404,
                  message: `id: no media message ${v1.body.data.id} in the inbox of ${ana}`,
                },
              },
            ],
          );
        }
      });
    }

    it('an image over 32,000,000 pixels is 413 before Baileys sees it (nothing uploaded); one at the limit goes', async () => {
      // 62 bytes declaring 8,000 × 8,000: Baileys' thumbnailer would decode all 64,000,000 pixels (256 MB).
      const uploads = sim.media.count();
      const bomb = await app.live('POST', '/v1/messages/send/image', {
        phone: ana,
        image: `data:image/gif;base64,${pixelFramesGif(1, 8000, 8000).toString('base64')}`,
      });
      assert.deepEqual(bomb.body, {
        error: {
          code: 413,
          message: 'image must be at most 32,000,000 pixels, width × height (it has 64,000,000)',
        },
      });
      assert.equal(sim.media.count(), uploads, 'no file reached the media server');
      // 5,000 × 6,400: parley makes its thumbnail (sharp, limitInputPixels), the recipient decrypts it.
      const gif = pixelFramesGif(1, 5000, 6400);
      const fits = await app.live('POST', '/v1/messages/send/image', {
        phone: ana,
        image: `data:image/gif;base64,${gif.toString('base64')}`,
      });
      assert.equal(fits.status, 200, JSON.stringify(fits.body));
      const entry = await received(fits.body.data.id, 'the image at the limit in the inbox');
      assert.deepEqual(pick(entry, { type: 'image', mimetype: 'image/gif' }), {
        type: 'image',
        mimetype: 'image/gif',
      });
      assert.deepEqual(entry.media, decrypted(gif));
    });

    it('a reply with media quotes the message it answers', async () => {
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Photo please?' });
      assert.equal(sent.status, 201);
      const reply = await app.live('POST', '/v1/messages/send/image', {
        phone: ana,
        image: dataUri('tiny.png', 'image/png'),
        id: sent.body.id,
      });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const entry = await received(reply.body.data.id, 'the reply in the inbox');
      assert.deepEqual(pick(entry, { type: 'image', mimetype: 'image/png', quotedId: sent.body.id }), {
        type: 'image',
        mimetype: 'image/png',
        quotedId: sent.body.id,
      });
      assert.deepEqual(entry.media, decrypted(fixture('tiny.png')));
    });

    if (ffmpegAvailable) {
      it('send/sticker from an MP4 (v1 and gateway): an animated 512×512 WEBP with the pack in its EXIF', async () => {
        const body = { sticker: dataUri('sticker.mp4', 'video/mp4'), packName: 'Moving', emojis: ['🚚'] };
        for (const send of [
          () => app.live('POST', '/v1/messages/send/sticker', { phone: ana, ...body }),
          () => gateway('/chat/send/sticker', { phone: ana, ...body }),
        ]) {
          const res = await send();
          assert.equal(res.status, 200, JSON.stringify(res.body));
          const entry = await received(res.body.data.id, 'the animated sticker in the inbox');
          assert.equal(entry.type, 'sticker');
          assert.equal(entry.animated, true);
          assert.equal(entry.mimetype, 'image/webp');
          assert.equal(entry.sticker?.packName, 'Moving');
          assert.deepEqual(entry.sticker?.emojis, ['🚚']);
          assert.match(entry.sticker?.packId ?? '', /^parley\.[0-9a-f]{16}$/);
          const bytes = plaintexts.get(entry.id);
          assert.ok(bytes);
          assert.deepEqual(entry.media, decrypted(bytes));
          const image = new webpmux.Image();
          await image.load(bytes);
          assert.equal(image.hasAnim, true);
          assert.deepEqual([image.width, image.height], [512, 512]);
        }
      });
    }

    it('a user sends media: parley reports each as a signed Message webhook with its metadata', async () => {
      const pdf = fixture('doc.pdf');
      const sends = [
        {
          request: { kind: 'image', data: fixture('tiny.jpg').toString('base64'), caption: 'Broken part' },
          message: {
            conversation: 'Broken part',
            imageMessage: {
              mimetype: 'image/jpeg',
              fileLength: fixture('tiny.jpg').length,
              caption: 'Broken part',
            },
          },
        },
        {
          request: {
            kind: 'document',
            data: pdf.toString('base64'),
            mimetype: 'application/pdf',
            fileName: 'order.pdf',
            caption: 'My order',
          },
          message: {
            conversation: 'My order',
            documentMessage: {
              mimetype: 'application/pdf',
              fileLength: pdf.length,
              caption: 'My order',
              fileName: 'order.pdf',
            },
          },
        },
        {
          request: { kind: 'audio', data: fixture('voice.ogg').toString('base64'), ptt: true },
          message: {
            conversation: '',
            audioMessage: {
              mimetype: 'audio/ogg; codecs=opus',
              fileLength: fixture('voice.ogg').length,
              ptt: true,
            },
          },
        },
        {
          request: { kind: 'video', data: fixture('clip.mp4').toString('base64'), caption: 'Unboxing' },
          message: {
            conversation: 'Unboxing',
            videoMessage: {
              mimetype: 'video/mp4',
              fileLength: fixture('clip.mp4').length,
              caption: 'Unboxing',
            },
          },
        },
        {
          request: { kind: 'sticker', data: fixture('tiny.webp').toString('base64') },
          message: {
            conversation: '',
            stickerMessage: { mimetype: 'image/webp', fileLength: fixture('tiny.webp').length },
          },
        },
      ];
      for (const { request, message } of sends) {
        const sent = await control(sim, 'POST', '/media', { from: ana, to: shop, ...request });
        assert.equal(sent.status, 201, JSON.stringify(sent.body));
        assert.deepEqual(sent.body.devices, 1);
        const found = await until(`the ${request.kind} Message webhook`, () => {
          const index = bodies(receiver.requests).findIndex(
            (b) => b.type === 'Message' && b.event.info.id === sent.body.id,
          );
          return index < 0
            ? undefined
            : { body: bodies(receiver.requests)[index], request: receiver.requests[index] };
        });
        assert.ok(found.request);
        assertSigned(found.request);
        assert.deepEqual(found.body.event.message, message, request.kind);
        assert.deepEqual(found.body.event.info.messageSource, {
          chat: `${ana}@s.whatsapp.net`,
          sender: `${ana}@s.whatsapp.net`,
          isFromMe: false,
          isGroup: false,
        });
      }
    });

    it('a user sends a location and a contact card: parley reports them as Message webhooks with their fields', async () => {
      const location = await control(sim, 'POST', '/location', {
        from: ana,
        to: shop,
        latitude: -22.9068,
        longitude: -43.1729,
        name: 'Home',
        address: 'Rua A, 1, Rio',
      });
      assert.equal(location.status, 201, JSON.stringify(location.body));
      const card = await control(sim, 'POST', '/contact', {
        from: ana,
        to: shop,
        displayName: 'Ana Souza',
        vcard: VCARD,
      });
      assert.equal(card.status, 201, JSON.stringify(card.body));
      const message = (id: string) =>
        until('the Message webhook', () =>
          bodies(receiver.requests).find((b) => b.type === 'Message' && b.event.info.id === id),
        );
      assert.deepEqual((await message(location.body.id)).event.message, {
        conversation: '',
        locationMessage: {
          degreesLatitude: -22.9068,
          degreesLongitude: -43.1729,
          name: 'Home',
          address: 'Rua A, 1, Rio',
        },
      });
      assert.deepEqual((await message(card.body.id)).event.message, {
        conversation: '',
        contactMessage: { displayName: 'Ana Souza', vcard: VCARD },
      });
    });
  });
}

for (const dialect of testDialects()) {
  describe(`media uploads verify the media server's certificate (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    const shop = '5511999990000';
    const ana = '5511988887777';

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect, trustMediaCa: false });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await pairLive(sim, app, shop);
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('without PLATFORM_CA_FILE the upload is refused by TLS: the send fails and nothing reaches the user', async () => {
      const res = await app.live('POST', '/v1/messages/send/image', {
        phone: ana,
        image: dataUri('tiny.jpg', 'image/jpeg'),
      });
      assert.deepEqual(res.body, {
        error: {
          code: 503,
          message: "the platform's media hosts could not be reached (Media upload failed on all hosts)",
        },
      });
      assert.equal(sim.media.count(), 0, 'no file reached the media server');
      const text = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'text still goes' });
      assert.equal(text.status, 200);
      await until('the text in the inbox', () =>
        sim.context.accounts.get(ana)?.inbox.find((e) => e.id === text.body.data.id),
      );
      assert.deepEqual(
        sim.context.accounts.get(ana)?.inbox.map((e) => e.type),
        ['text'],
      );
    });
  });
}
