import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import type { OutgoingMessage } from '../../src/domain/messages.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { ffmpegAvailable } from '../support/ffmpeg.ts';
import { pixelFramesGif } from '../support/gif.ts';
import { declaredPng } from '../support/png.ts';
import { readStickerExif } from '../support/sticker-exif.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, dataUri, fixture, OWN, PEER, storedContent } from './support.ts';

/**
 * Media sent by data URI (docs/api.md#messages, docs/decisions/0017-messages-and-media.md): each kind's formats
 * judged from the bytes, its limits and refusals naming the field, stickers converted to WEBP with their pack
 * metadata, and animated stickers without ffmpeg. Media sent by https URL: media-urls.test.ts.
 */

const IMAGE_FORMATS = 'image must be JPEG, PNG, GIF or WEBP';
const SCHEME = (field: string) => `${field} must be an https:// URL or a data: URI`;

/** Records what reaches the engine's `send`, so the converted bytes can be inspected. */
function spySends(t: TestApp): OutgoingMessage[] {
  const session = t.services.sessions.existing(t.instance.id);
  assert.ok(session);
  const sent: OutgoingMessage[] = [];
  const original = session.send.bind(session);
  session.send = (message) => {
    sent.push(message);
    return original(message);
  };
  return sent;
}

for (const dialect of testDialects()) {
  describe(`media sends by data URI (docs/api.md#messages, docs/decisions/0017-messages-and-media.md) [${dialect}]`, () => {
    let t: TestApp;
    let sent: OutgoingMessage[];
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      sent = spySends(t);
    });
    after(() => t.close());

    it('image: JPEG, PNG, GIF and WEBP judged from the bytes (the declared type is ignored)', async () => {
      const cases = [
        ['tiny.jpg', 'image/jpeg'],
        ['tiny.png', 'image/png'],
        ['tiny.gif', 'image/gif'],
        ['tiny.webp', 'image/webp'],
      ] as const;
      for (const [name, mimetype] of cases) {
        const bytes = fixture(name);
        const res = await t.call('POST', '/v1/messages/send/image', {
          phone: PEER,
          image: dataUri(bytes, 'text/plain'),
          caption: `a ${name}`,
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.data.details, 'Sent');
        assert.deepEqual(await storedContent(t, res.body.data.id), {
          kind: 'image',
          mimetype,
          fileLength: bytes.length,
          text: `a ${name}`,
        });
      }
      const last = sent.at(-1);
      assert.equal(last?.content.kind, 'image');
      if (last?.content.kind === 'image') assert.deepEqual(last.content.media.data, fixture('tiny.webp'));
    });

    it('image: refuses other formats (a text file named .jpg, a PDF) naming the allowed ones', async () => {
      for (const name of ['not-an-image.jpg', 'doc.pdf', 'clip.mp4']) {
        const res = await t.call('POST', '/v1/messages/send/image', {
          phone: PEER,
          image: dataUri(fixture(name), 'image/jpeg'),
        });
        assert.deepEqual(res.body, bad(400, IMAGE_FORMATS), name);
      }
    });

    it('image: 413 naming the limit over 16 MB; the route accepts bodies above the 1 MB default, 16 MB as wrapped base64 too', async () => {
      const over = Buffer.alloc(16 * 1024 * 1024 + 1);
      const res = await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: dataUri(over) });
      assert.deepEqual(res.body, bad(413, 'image must be at most 16 MB'));
      // The largest allowed image as MIME-wrapped base64 (CRLF every 76 characters): the decoded size decides.
      const largest = Buffer.alloc(16 * 1024 * 1024, 7);
      fixture('tiny.jpg').copy(largest);
      const wrapped = largest.toString('base64').replace(/(.{76})/g, '$1\r\n');
      const fits = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: `data:image/jpeg;base64,${wrapped}`,
      });
      assert.equal(fits.status, 200, JSON.stringify(fits.body));
      const big = Buffer.alloc(2 * 1024 * 1024, 7);
      const notImage = await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: dataUri(big) });
      assert.deepEqual(notImage.body, bad(400, IMAGE_FORMATS), 'a 2.7 MB body reaches the format check');
      const text = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'x'.repeat(1024 * 1024) });
      assert.deepEqual(
        text.body,
        bad(413, 'request body must be at most 1 MB'),
        'the text route keeps the 1 MB default',
      );
    });

    it('image: 413 over 32,000,000 pixels, width × height, read from its header before either engine sees it', async () => {
      // 62 bytes declaring 8,000 × 8,000: 256 MB decoded, what the live engine's thumbnail would cost.
      const bomb = dataUri(pixelFramesGif(1, 8000, 8000));
      const over = bad(413, 'image must be at most 32,000,000 pixels, width × height (it has 64,000,000)');
      const before = sent.length;
      const res = await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: bomb });
      assert.deepEqual(res.body, over);
      // 74 bytes of PNG declaring 30,000 × 30,000: the header decides, whatever the format.
      const png = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: dataUri(declaredPng(30_000, 30_000)),
      });
      assert.deepEqual(
        png.body,
        bad(413, 'image must be at most 32,000,000 pixels, width × height (it has 900,000,000)'),
      );
      // A status image meets the same rule.
      const status = await t.call('POST', '/v1/status/image', { image: bomb, contacts: [PEER] });
      assert.deepEqual(status.body, over);
      assert.equal(sent.length, before, 'nothing reached the engine');
      // Exactly at the limit (5,000 × 6,400) it goes.
      const fits = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: dataUri(pixelFramesGif(1, 5000, 6400)),
      });
      assert.equal(fits.status, 200, JSON.stringify(fits.body));
      // A header sharp cannot read (a JPEG's first bytes, then text) is 400 naming the field.
      const unreadable = Buffer.concat([
        fixture('tiny.jpg').subarray(0, 4),
        Buffer.from('not the rest of a JPEG'),
      ]);
      const garbled = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: dataUri(unreadable),
      });
      assert.deepEqual(garbled.body, bad(400, 'image could not be read as an image'));
    });

    it('refuses other schemes, local paths and malformed data URIs, naming the field', async () => {
      const send = (image: unknown) => t.call('POST', '/v1/messages/send/image', { phone: PEER, image });
      for (const image of [
        'http://example.com/a.jpg',
        'ftp://example.com/a.jpg',
        'file:///etc/passwd',
        '/etc/passwd',
        'a.jpg',
      ]) {
        assert.deepEqual((await send(image)).body, bad(400, SCHEME('image')), image);
      }
      assert.deepEqual((await send('')).body, bad(400, SCHEME('image')));
      assert.deepEqual((await send(42)).body, bad(400, SCHEME('image')));
      assert.deepEqual((await send({ phone: PEER })).body, bad(400, SCHEME('image')));
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send/image', { phone: PEER })).body,
        bad(400, 'image is required'),
      );
      assert.deepEqual(
        (await send('data:image/png,rawtext')).body,
        bad(400, 'image data URI must be base64-encoded (data:<type>;base64,<data>)'),
      );
      assert.deepEqual(
        (await send('data:image/png;base64,@@@@')).body,
        bad(400, 'image data URI holds invalid base64'),
      );
      assert.deepEqual((await send('data:image/png;base64,')).body, bad(400, 'image is empty'));
    });

    it('image with id quotes a reply', async () => {
      const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'pick one' });
      const res = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: dataUri(fixture('tiny.png')),
        id: first.body.data.id,
      });
      assert.equal(res.status, 200);
      assert.equal((await storedContent(t, res.body.data.id)).quotedId, first.body.data.id);
    });

    it('image with an empty caption stores no text, as the live engine stores none', async () => {
      const bytes = fixture('tiny.png');
      const res = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: dataUri(bytes),
        caption: '',
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(await storedContent(t, res.body.data.id), {
        kind: 'image',
        mimetype: 'image/png',
        fileLength: bytes.length,
      });
    });

    it('document: any format, file name defaulting to file.<ext>, caption; text told from binary', async () => {
      const pdf = fixture('doc.pdf');
      const res = await t.call('POST', '/v1/messages/send/document', {
        phone: PEER,
        document: dataUri(pdf),
        caption: 'the contract',
      });
      assert.equal(res.status, 200);
      assert.deepEqual(await storedContent(t, res.body.data.id), {
        kind: 'document',
        mimetype: 'application/pdf',
        fileLength: pdf.length,
        fileName: 'file.pdf',
        text: 'the contract',
      });
      const csv = await t.call('POST', '/v1/messages/send/document', {
        phone: PEER,
        document: dataUri(Buffer.from('a,b\n1,2\n'), 'application/pdf'),
        fileName: 'numbers.csv',
      });
      assert.deepEqual(await storedContent(t, csv.body.data.id), {
        kind: 'document',
        mimetype: 'text/csv',
        fileLength: 8,
        fileName: 'numbers.csv',
      });
      const blob = await t.call('POST', '/v1/messages/send/document', {
        phone: PEER,
        document: dataUri(Buffer.from([0, 1, 2, 3, 255])),
      });
      assert.deepEqual(await storedContent(t, blob.body.data.id), {
        kind: 'document',
        mimetype: 'application/octet-stream',
        fileLength: 5,
        fileName: 'file',
      });
      const missing = await t.call('POST', '/v1/messages/send/document', { phone: PEER });
      assert.deepEqual(missing.body, bad(400, 'document is required'));
    });

    it('audio: OGG/Opus, MP3, M4A and WAV as a voice note; other formats refused', async () => {
      const cases = [
        ['voice.ogg', 'audio/ogg; codecs=opus'],
        ['tone.mp3', 'audio/mpeg'],
        ['tone.m4a', 'audio/x-m4a'],
        ['tone.wav', 'audio/wav'],
      ] as const;
      for (const [name, mimetype] of cases) {
        const bytes = fixture(name);
        const res = await t.call('POST', '/v1/messages/send/audio', { phone: PEER, audio: dataUri(bytes) });
        assert.equal(res.status, 200, name);
        assert.deepEqual(await storedContent(t, res.body.data.id), {
          kind: 'audio',
          mimetype,
          fileLength: bytes.length,
          ptt: true,
        });
      }
      const png = await t.call('POST', '/v1/messages/send/audio', {
        phone: PEER,
        audio: dataUri(fixture('tiny.png')),
      });
      assert.deepEqual(png.body, bad(400, 'audio must be OGG (Opus), MP3, M4A or WAV'));
    });

    it('video: MP4 and 3GP with caption; other formats refused', async () => {
      for (const [name, mimetype] of [
        ['clip.mp4', 'video/mp4'],
        ['clip.3gp', 'video/3gpp'],
      ] as const) {
        const bytes = fixture(name);
        const res = await t.call('POST', '/v1/messages/send/video', {
          phone: PEER,
          video: dataUri(bytes),
          caption: 'watch',
        });
        assert.equal(res.status, 200, name);
        assert.deepEqual(await storedContent(t, res.body.data.id), {
          kind: 'video',
          mimetype,
          fileLength: bytes.length,
          text: 'watch',
        });
      }
      const ogg = await t.call('POST', '/v1/messages/send/video', {
        phone: PEER,
        video: dataUri(fixture('voice.ogg')),
      });
      assert.deepEqual(ogg.body, bad(400, 'video must be MP4 or 3GP'));
    });

    it('sticker: a static image becomes a 512×512 WEBP ≤ 100 KB with the pack metadata in its EXIF', async () => {
      const res = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(fixture('tiny.png'), 'image/webp'),
        packName: 'Parley pack',
        packId: 'com.example.pack',
        packPublisher: 'Example Inc.',
        emojis: ['😀', '🎉'],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const message = sent.at(-1);
      assert.ok(message?.content.kind === 'sticker');
      const { data, mimetype } = message.content.media;
      assert.equal(mimetype, 'image/webp');
      assert.equal(message.content.animated, false);
      assert.ok(data.length <= 100 * 1024);
      const meta = await sharp(data).metadata();
      assert.deepEqual([meta.format, meta.width, meta.height], ['webp', 512, 512]);
      assert.deepEqual(await readStickerExif(data), {
        'sticker-pack-id': 'com.example.pack',
        'sticker-pack-name': 'Parley pack',
        'sticker-pack-publisher': 'Example Inc.',
        emojis: ['😀', '🎉'],
      });
      assert.deepEqual(await storedContent(t, res.body.data.id), {
        kind: 'sticker',
        mimetype: 'image/webp',
        fileLength: data.length,
      });
    });

    if (ffmpegAvailable) {
      it('sticker: MP4 becomes an animated 512×512 WEBP ≤ 500 KB (ffmpeg); animated WEBP stays animated', async () => {
        for (const name of ['sticker.mp4', 'animated.webp']) {
          const res = await t.call('POST', '/v1/messages/send/sticker', {
            phone: PEER,
            sticker: dataUri(fixture(name)),
            packName: 'Moving',
          });
          assert.equal(res.status, 200, `${name}: ${JSON.stringify(res.body)}`);
          const message = sent.at(-1);
          assert.ok(message?.content.kind === 'sticker');
          assert.equal(message.content.animated, true, name);
          const data = message.content.media.data;
          assert.ok(data.length <= 500 * 1024);
          const meta = await sharp(data, { animated: true }).metadata();
          assert.equal(meta.format, 'webp');
          assert.equal(meta.width, 512);
          assert.equal(meta.pageHeight, 512);
          assert.ok((meta.pages ?? 1) > 1, `${name} is animated`);
          assert.equal((await readStickerExif(data))?.['sticker-pack-name'], 'Moving');
        }
      });
    }

    it('sticker: refuses other formats and inputs over 500 KB', async () => {
      const pdf = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(fixture('doc.pdf')),
      });
      assert.deepEqual(pdf.body, bad(400, 'sticker must be WEBP, PNG, JPEG, GIF or MP4'));
      const big = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(Buffer.alloc(500 * 1024 + 1)),
      });
      assert.deepEqual(big.body, bad(413, 'sticker must be at most 500 KB'));
      const emojis = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(fixture('tiny.png')),
        emojis: Array.from({ length: 11 }, () => '😀'),
      });
      assert.deepEqual(emojis.body, bad(400, 'emojis must have at most 10 items'));
    });

    it('sticker: a GIF over the frame or pixel budget is 413 naming the rule, before any conversion', async () => {
      const frames = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(pixelFramesGif(101, 1, 1)),
      });
      assert.deepEqual(frames.body, bad(413, 'sticker must have at most 100 frames (it has 101)'));
      const pixels = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(pixelFramesGif(20, 2000, 1000)),
      });
      assert.deepEqual(
        pixels.body,
        bad(413, 'sticker must be at most 32,000,000 pixels, width × height × frames (it has 40,000,000)'),
      );
    });

    it('media sends check the recipient (422) before fetching the media', async () => {
      const res = await t.call('POST', '/v1/messages/send/image', {
        phone: '5511999990000',
        image: 'https://192.0.2.1/never-fetched.jpg',
      });
      assert.deepEqual(res.body, bad(422, 'recipient 5511999990000 is not registered on the platform'));
    });
  });

  describe(`animated stickers with FFMPEG_PATH pointing at a missing binary (docs/decisions/0017-messages-and-media.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect, { env: { FFMPEG_PATH: '/nonexistent/ffmpeg' } });
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('answers 503 naming ffmpeg and the binary tried; static stickers still work', async () => {
      const res = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(fixture('sticker.mp4')),
      });
      assert.deepEqual(
        res.body,
        bad(
          503,
          'animated stickers need ffmpeg, which is not installed on this server (install ffmpeg or set FFMPEG_PATH; tried "/nonexistent/ffmpeg")',
        ),
      );
      const png = await t.call('POST', '/v1/messages/send/sticker', {
        phone: PEER,
        sticker: dataUri(fixture('tiny.png')),
      });
      assert.equal(png.status, 200, JSON.stringify(png.body));
    });
  });
}
