/**
 * POST /v1/messages/forward of received media meets the rules a send of its kind meets
 * (docs/decisions/0041-forward-calls-channels.md, docs/decisions/0017-messages-and-media.md): the kind's size limit
 * and formats judged from the bytes, an image's pixels from its header, a sticker WEBP within the sticker limits, and
 * the MIME type sent the one of the bytes, never the one the sender declared. A received file is what its sender
 * chose to deliver, not what parley checked.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import type { MessageContent, OutgoingMessage } from '../../src/domain/messages.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { pixelFramesGif } from '../support/gif.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, dataUri, fixture, OWN, PEER } from './support.ts';

const OTHER = '5511977776666';

for (const dialect of testDialects()) {
  describe(`forward of received media: the send rules of its kind [${dialect}]`, () => {
    let t: TestApp;
    const sent: OutgoingMessage[] = [];
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      const original = session.send.bind(session);
      session.send = (message) => {
        sent.push(message);
        return original(message);
      };
    });
    after(() => t.close());

    /** A file the sandbox's user `PEER` sends the account, declared as `mime`; its message id. */
    const received = async (
      kind: string,
      data: Buffer,
      mime: string,
      extra: Record<string, unknown> = {},
    ) => {
      const res = await t.call('POST', '/v1/sandbox/inbound/media', {
        phone: PEER,
        kind,
        media: dataUri(data, mime),
        ...extra,
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data.id as string;
    };
    const forward = (messageId: string) =>
      t.call('POST', '/v1/messages/forward', { phone: OTHER, messageId });

    it('a sticker over 500 KB is 413 as /send/sticker answers it; one that is not WEBP is 400', async () => {
      const junk = randomBytes(600 * 1024);
      const before = sent.length;
      const big = await forward(await received('sticker', junk, 'image/webp'));
      const direct = await t.call('POST', '/v1/messages/send/sticker', {
        phone: OTHER,
        sticker: dataUri(junk),
      });
      assert.deepEqual(big.body, bad(413, 'sticker must be at most 500 KB'));
      assert.deepEqual(direct.body, big.body, 'the same answer as a send');
      const png = await forward(await received('sticker', fixture('tiny.png'), 'image/webp'));
      assert.deepEqual(png.body, bad(400, 'sticker must be WEBP'));
      assert.equal(sent.length, before, 'nothing reached the engine');
    });

    it('a static WEBP sticker over 100 KB is 413', async () => {
      const noise = await sharp(randomBytes(256 * 256 * 3), { raw: { width: 256, height: 256, channels: 3 } })
        .webp({ lossless: true })
        .toBuffer();
      assert.ok(noise.length > 100 * 1024 && noise.length <= 500 * 1024, `${noise.length} bytes`);
      const res = await forward(await received('sticker', noise, 'image/webp'));
      assert.deepEqual(res.body, bad(413, 'sticker must be at most 100 KB as a static WEBP'));
    });

    it('an "image" that is a PDF declared text/html is 400; an image goes with the type of its bytes', async () => {
      const pdf = await forward(await received('image', fixture('doc.pdf'), 'text/html'));
      assert.deepEqual(pdf.body, bad(400, 'image must be JPEG, PNG, GIF or WEBP'));
      const png = await forward(await received('image', fixture('tiny.png'), 'text/html'));
      assert.equal(png.status, 200, JSON.stringify(png.body));
      const last = sent.at(-1);
      assert.equal(last?.content.kind, 'image');
      if (last?.content.kind === 'image') assert.equal(last.content.media.mimetype, 'image/png');
    });

    it('an image over 32,000,000 pixels is 413 as /send/image answers it, before the engine sees it', async () => {
      const bomb = pixelFramesGif(1, 8000, 8000);
      const before = sent.length;
      const res = await forward(await received('image', bomb, 'image/gif'));
      const direct = await t.call('POST', '/v1/messages/send/image', { phone: OTHER, image: dataUri(bomb) });
      assert.deepEqual(
        res.body,
        bad(413, 'image must be at most 32,000,000 pixels, width × height (it has 64,000,000)'),
      );
      assert.deepEqual(direct.body, res.body, 'the same answer as a send');
      assert.equal(sent.length, before, 'nothing reached the engine');
    });

    it('audio and video meet their formats; a document is typed from its bytes and file name', async () => {
      const vorbis = await forward(await received('audio', fixture('tone-vorbis.ogg'), 'audio/ogg'));
      assert.deepEqual(vorbis.body, bad(400, 'audio must be OGG (Opus), MP3, M4A or WAV'));
      const notVideo = await forward(await received('video', fixture('tiny.gif'), 'video/mp4'));
      assert.deepEqual(notVideo.body, bad(400, 'video must be MP4 or 3GP'));
      const voice = await forward(await received('audio', fixture('voice.ogg'), 'text/html'));
      assert.equal(voice.status, 200, JSON.stringify(voice.body));
      const audio = sent.at(-1);
      if (audio?.content.kind === 'audio')
        assert.equal(audio.content.media.mimetype, 'audio/ogg; codecs=opus');
      else assert.fail(`an audio: ${audio?.content.kind}`);
      const doc = await received('document', Buffer.from('plain words\n'), 'text/html', {
        fileName: 'notes.txt',
      });
      assert.equal((await forward(doc)).status, 200);
      const text = sent.at(-1);
      if (text?.content.kind === 'document') {
        assert.equal(text.content.media.mimetype, 'text/plain');
        assert.equal(text.content.fileName, 'notes.txt');
      } else assert.fail(`a document: ${text?.content.kind}`);
    });

    it('a received poll, contact card or location meets the send rules of its kind; nothing is stored', async () => {
      /** A message of `PEER` with `content`, recorded as the live engine records one it received; its id. */
      let n = 0;
      const receivedContent = async (content: MessageContent) => {
        n += 1;
        const id = `RULES${n}`;
        await t.services.recorder.record(t.instance.id, {
          type: 'message',
          message: {
            id,
            source: {
              chat: `${PEER}@s.whatsapp.net`,
              sender: `${PEER}@s.whatsapp.net`,
              isFromMe: false,
              isGroup: false,
            },
            pushName: 'Peer',
            timestamp: t.clock(),
            content,
          },
        });
        return id;
      };
      const poll = (options: string[], selectableCount = 0, text = 'Day?'): MessageContent => ({
        kind: 'poll',
        text,
        poll: { options, selectableCount },
      });
      const jobs = async () =>
        (
          await t.services.store.db
            .selectFrom('send_jobs')
            .select('id')
            .where('instance_id', '=', t.instance.id)
            .execute()
        ).length;
      const before = sent.length;
      const jobsBefore = await jobs();
      const cases: [MessageContent, string][] = [
        [poll(['Mon', 'Mon']), 'options must be unique (Mon appears twice)'],
        [poll(['Mon']), 'options must have 2 to 12 items'],
        [poll(Array.from({ length: 13 }, (_, i) => `Day ${i}`)), 'options must have 2 to 12 items'],
        [poll(['Mon', '']), 'options must not be blank'],
        [poll(['Mon', 'x'.repeat(101)]), 'options must be 1 to 100 characters'],
        [poll(['Mon', 'Tue'], 3), 'selectableCount must be 0 (any) or 1 to 2 (the number of options)'],
        [poll(['Mon', 'Tue'], 0, ''), 'name must be 1 to 255 characters'],
        [{ kind: 'contact', name: 'Ana' }, 'vcard must contain the line BEGIN:VCARD'],
        [
          { kind: 'contact', name: 'Ana', vcard: 'BEGIN:VCARD\nFN:Ana\nN:Ana;;;;\nEND:VCARD' },
          'vcard must contain a TEL line',
        ],
        [{ kind: 'location', name: 'Somewhere' }, 'latitude must be a number from -90 to 90'],
        [{ kind: 'location', latitude: 10, longitude: 200 }, 'longitude must be a number from -180 to 180'],
      ];
      for (const [content, rule] of cases) {
        const id = await receivedContent(content);
        assert.deepEqual(
          (await forward(id)).body,
          bad(400, `message ${id} cannot be forwarded: ${rule}`),
          rule,
        );
      }
      assert.equal(sent.length, before, 'nothing reached the engine');
      assert.equal(await jobs(), jobsBefore, 'no send job stored');
      const good = await receivedContent(poll(['Mon', 'Tue'], 1));
      assert.equal((await forward(good)).status, 200);
      assert.deepEqual(sent.at(-1)?.content, {
        kind: 'poll',
        name: 'Day?',
        options: ['Mon', 'Tue'],
        selectableCount: 1,
      });
    });
  });
}
