import assert from 'node:assert/strict';
import { createDecipheriv } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { before, describe, it } from 'node:test';
import { getMediaKeys, type MediaType, proto, type WAMediaUploadFunction } from 'baileys';
import sharp from 'sharp';
import type { EngineMessage, OutgoingMessage } from '../../src/domain/messages.ts';
import { contentOf } from '../../src/domain/sends.ts';
import { toMessageContent } from '../../src/engines/baileys/incoming.ts';
import {
  buildOutgoingMessage,
  buildReaction,
  type OutgoingDeps,
  resendableProto,
} from '../../src/engines/baileys/outgoing.ts';
import { stickerExif, withExif } from '../../src/media/exif.ts';
import { imageThumbnail } from '../../src/media/image.ts';
import { pixelFramesGif } from '../support/gif.ts';
import { readStickerExif } from '../support/sticker-exif.ts';
import { ME } from './fake-socket.ts';
import { capturingLogger, silentLogger } from './support.ts';

const PEER = '5511988887777@s.whatsapp.net';
const GROUP = '120363000000000001@g.us';

/** A stub of Baileys' media upload: keeps the encrypted bytes it was given, answers a CDN path. */
function stubUpload(): { upload: WAMediaUploadFunction; uploads: { mediaType: MediaType; bytes: Buffer }[] } {
  const uploads: { mediaType: MediaType; bytes: Buffer }[] = [];
  const upload: WAMediaUploadFunction = async (path, { mediaType }) => {
    uploads.push({ mediaType, bytes: await readFile(path) });
    return {
      mediaUrl: `https://mmg.whatsapp.net/v/t62.${mediaType}/stub`,
      directPath: `/v/t62.${mediaType}/stub`,
    };
  };
  return { upload, uploads };
}

/** Decrypts what the stub received with the message's media key (WhatsApp's AES-256-CBC + 10-byte MAC layout). */
async function decryptUpload(bytes: Buffer, mediaKey: Uint8Array, type: MediaType): Promise<Buffer> {
  const { cipherKey, iv } = await getMediaKeys(mediaKey, type);
  const decipher = createDecipheriv('aes-256-cbc', cipherKey, iv);
  return Buffer.concat([decipher.update(bytes.subarray(0, -10)), decipher.final()]);
}

const stored = new Map<string, EngineMessage>();
function deps(upload: WAMediaUploadFunction, extra: Partial<OutgoingDeps> = {}): OutgoingDeps {
  return {
    upload,
    userJid: ME.id,
    messageId: '3EB0C0FFEE0123456789AB',
    findMessage: async (id) => stored.get(id),
    logger: silentLogger(),
    ...extra,
  };
}

async function build(message: OutgoingMessage, extra: Partial<OutgoingDeps> = {}) {
  const stub = stubUpload();
  const msg = await buildOutgoingMessage(message.to, message, deps(stub.upload, extra));
  assert.equal(msg.key.id, '3EB0C0FFEE0123456789AB');
  assert.equal(msg.key.remoteJid, message.to);
  assert.equal(msg.key.fromMe, true);
  const content = msg.message;
  assert.ok(content);
  return { msg, content, uploads: stub.uploads };
}

describe("request → Baileys content, through Baileys' own generateWAMessage (stub upload)", () => {
  let png: Buffer;
  let webp: Buffer;
  before(async () => {
    png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#c0ffee' } })
      .png()
      .toBuffer();
    webp = await sharp({ create: { width: 512, height: 512, channels: 4, background: '#00000000' } })
      .webp()
      .toBuffer();
    stored.set('3EB0AAAA', {
      id: '3EB0AAAA',
      source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
      pushName: 'Ana',
      timestamp: 1,
      content: { kind: 'text', text: 'original' },
    });
    stored.set('3EB0BBBB', {
      id: '3EB0BBBB',
      source: { chat: GROUP, sender: '5511977776666@s.whatsapp.net', isFromMe: false, isGroup: true },
      pushName: 'Bia',
      timestamp: 1,
      content: { kind: 'image', text: 'look', mimetype: 'image/jpeg' },
    });
  });

  it('text: no link preview unless asked', async () => {
    const { content } = await build({
      to: PEER,
      content: { kind: 'text', text: '*hi* see https://example.com/a', linkPreview: false },
    });
    assert.equal(content.extendedTextMessage?.text, '*hi* see https://example.com/a');
    assert.equal(content.extendedTextMessage?.matchedText ?? undefined, undefined);
    assert.equal(content.extendedTextMessage?.title ?? undefined, undefined);
  });

  it('text with linkPreview: the preview card comes from the guarded fetcher, or shows the host', async () => {
    const text = { kind: 'text' as const, text: 'see https://example.com/a', linkPreview: true };
    const fetched = await build(
      { to: PEER, content: text },
      { linkPreview: async (url) => ({ title: `Title of ${url}`, description: 'desc' }) },
    );
    assert.equal(fetched.content.extendedTextMessage?.matchedText, 'https://example.com/a');
    assert.equal(fetched.content.extendedTextMessage?.title, 'Title of https://example.com/a');
    assert.equal(fetched.content.extendedTextMessage?.description, 'desc');
    const plain = await build({ to: PEER, content: text });
    assert.equal(plain.content.extendedTextMessage?.title, 'example.com');
  });

  it('reply: quotes the stored message through contextInfo (1:1 and group)', async () => {
    const one = await build({
      to: PEER,
      content: { kind: 'text', text: 'yes', linkPreview: false },
      quotedId: '3EB0AAAA',
    });
    const info = one.content.extendedTextMessage?.contextInfo;
    assert.equal(info?.stanzaId, '3EB0AAAA');
    assert.equal(info?.participant, PEER);
    assert.equal(info?.quotedMessage?.conversation, 'original');
    const group = await build({
      to: GROUP,
      content: { kind: 'location', latitude: -23.5, longitude: -46.6 },
      quotedId: '3EB0BBBB',
    });
    const gInfo = group.content.locationMessage?.contextInfo;
    assert.equal(gInfo?.participant, '5511977776666@s.whatsapp.net');
    assert.equal(gInfo?.quotedMessage?.imageMessage?.caption, 'look');
  });

  it('reply to a message parley stored in another chat: 400 naming id, never quoted; a LID and its phone JID are one chat', async () => {
    const lid = '137777888891155@lid';
    stored.set('3A00PRIVATE', {
      id: '3A00PRIVATE',
      source: {
        chat: '5511977776666@s.whatsapp.net',
        sender: '5511977776666@s.whatsapp.net',
        isFromMe: false,
        isGroup: false,
      },
      pushName: 'Caio',
      timestamp: 1,
      content: { kind: 'text', text: 'my card PIN is 1234' },
    });
    stored.set('3A00BYLID', {
      id: '3A00BYLID',
      source: { chat: lid, sender: lid, isFromMe: false, isGroup: false },
      pushName: 'Ana',
      timestamp: 1,
      content: { kind: 'text', text: 'from a LID' },
    });
    const text = { kind: 'text' as const, text: 'ok', linkPreview: false };
    const refused = { code: 'invalid', message: 'id must name a message in this chat' };
    await assert.rejects(build({ to: PEER, content: text, quotedId: '3A00PRIVATE' }), refused, '1:1');
    await assert.rejects(
      build({ to: GROUP, content: text, quotedId: '3A00PRIVATE' }),
      refused,
      'into a group',
    );
    await assert.rejects(
      build({ to: PEER, content: text, quotedId: '3EB0BBBB' }),
      refused,
      'a group message',
    );
    await assert.rejects(
      build({ to: PEER, content: text, quotedId: '3A00BYLID' }),
      refused,
      'no mapping known',
    );
    const storedChatOf = async (jid: string) => (jid === lid ? PEER : jid);
    const byLid = await build({ to: PEER, content: text, quotedId: '3A00BYLID' }, { storedChatOf });
    assert.equal(byLid.content.extendedTextMessage?.contextInfo?.quotedMessage?.conversation, 'from a LID');
    const toLid = await build({ to: lid, content: text, quotedId: '3EB0AAAA' }, { storedChatOf });
    assert.equal(toLid.content.extendedTextMessage?.contextInfo?.quotedMessage?.conversation, 'original');
  });

  it('reply to an id parley never stored: contextInfo carries the id', async () => {
    const { content } = await build({
      to: PEER,
      content: { kind: 'text', text: 'hm', linkPreview: false },
      quotedId: '3EB0UNKNOWN',
    });
    assert.equal(content.extendedTextMessage?.contextInfo?.stanzaId, '3EB0UNKNOWN');
    assert.equal(content.extendedTextMessage?.contextInfo?.participant, PEER);
  });

  it('image: uploaded encrypted, with caption, mimetype, size and a thumbnail', async () => {
    const { content, uploads } = await build({
      to: PEER,
      content: { kind: 'image', media: { data: png, mimetype: 'image/png' }, caption: 'a pic' },
    });
    const image = content.imageMessage;
    assert.ok(image);
    assert.equal(image.caption, 'a pic');
    assert.equal(image.mimetype, 'image/png');
    assert.equal(Number(image.fileLength), png.length);
    assert.equal(image.directPath, '/v/t62.image/stub');
    assert.ok(image.jpegThumbnail && image.jpegThumbnail.length > 0);
    assert.equal(uploads[0]?.mediaType, 'image');
    assert.ok(image.mediaKey);
    assert.deepEqual(await decryptUpload(uploads[0]?.bytes ?? Buffer.alloc(0), image.mediaKey, 'image'), png);
  });

  it("image: the thumbnail is parley's, Baileys' own kind (a 32 px wide JPEG) with the image's width and height", async () => {
    const { content } = await build({
      to: PEER,
      content: { kind: 'image', media: { data: png, mimetype: 'image/png' } },
    });
    const image = content.imageMessage;
    assert.ok(image?.jpegThumbnail);
    const made = await imageThumbnail(png);
    assert.deepEqual(Buffer.from(image.jpegThumbnail), made.jpeg);
    const thumb = await sharp(Buffer.from(image.jpegThumbnail)).metadata();
    assert.deepEqual([thumb.format, thumb.width, thumb.height], ['jpeg', 32, 24]);
    assert.deepEqual([image.width, image.height], [64, 48]);
  });

  it('image over 32,000,000 pixels reaching the engine: Baileys does not decode it; it goes without a thumbnail', async () => {
    // 62 bytes declaring 6,000 × 6,000 (36,000,000 pixels, 144 MB decoded): Baileys' thumbnailer (sharp, with its
    // default limit of 268,402,689 pixels) would decode it whole and state its size. The send checks refuse such an
    // image before the engine sees one (test/messages/media.test.ts); the engine still never lets Baileys decode it.
    const gif = pixelFramesGif(1, 6000, 6000);
    const { logger, lines } = capturingLogger();
    const { content, uploads } = await build(
      { to: PEER, content: { kind: 'image', media: { data: gif, mimetype: 'image/gif' }, caption: 'big' } },
      { logger },
    );
    const image = content.imageMessage;
    assert.ok(image);
    assert.equal(image.caption, 'big');
    // What the recipient gets: the message as encoded, decoded again (a field not sent is not an own property).
    const wire = proto.Message.ImageMessage.decode(proto.Message.ImageMessage.encode(image).finish());
    assert.equal(Object.hasOwn(wire, 'jpegThumbnail'), false, 'no thumbnail: the image was never decoded');
    assert.deepEqual(
      [
        Object.hasOwn(wire, 'width') ? wire.width : 'unset',
        Object.hasOwn(wire, 'height') ? wire.height : 'unset',
      ],
      ['unset', 'unset'],
      "no size: Baileys' thumbnailer states the size of the image it decoded",
    );
    assert.equal(wire.caption, 'big');
    assert.deepEqual(
      lines.filter((line) => line.level >= 40).map((line) => line.msg),
      ['image thumbnail could not be made; sending the image without one'],
    );
    assert.ok(image.mediaKey);
    assert.deepEqual(await decryptUpload(uploads[0]?.bytes ?? Buffer.alloc(0), image.mediaKey, 'image'), gif);
  });

  it('document, audio as voice note, video', async () => {
    const bytes = Buffer.from('%PDF-1.4 fake');
    const doc = await build({
      to: PEER,
      content: {
        kind: 'document',
        media: { data: bytes, mimetype: 'application/pdf' },
        fileName: 'a.pdf',
        caption: 'c',
      },
    });
    assert.equal(doc.content.documentMessage?.fileName, 'a.pdf');
    assert.equal(doc.content.documentMessage?.mimetype, 'application/pdf');
    assert.equal(doc.content.documentMessage?.caption, 'c');
    const audio = await build({
      to: PEER,
      content: { kind: 'audio', media: { data: Buffer.from('OggS fake'), mimetype: 'audio/ogg' } },
    });
    assert.equal(audio.content.audioMessage?.ptt, true);
    assert.equal(audio.content.audioMessage?.mimetype, 'audio/ogg; codecs=opus');
    const video = await build({
      to: GROUP,
      content: {
        kind: 'video',
        media: { data: Buffer.from('fake mp4'), mimetype: 'video/mp4' },
        caption: 'v',
      },
    });
    assert.equal(video.content.videoMessage?.caption, 'v');
    assert.equal(video.content.videoMessage?.mimetype, 'video/mp4');
    assert.equal(video.msg.participant, ME.id, 'group sends carry the sender');
  });

  it('location and contact card', async () => {
    const loc = await build({
      to: PEER,
      content: {
        kind: 'location',
        latitude: 48.8584,
        longitude: 2.2945,
        name: 'Tour Eiffel',
        address: 'Paris',
      },
    });
    assert.deepEqual(
      { ...loc.content.locationMessage },
      { degreesLatitude: 48.8584, degreesLongitude: 2.2945, name: 'Tour Eiffel', address: 'Paris' },
    );
    const vcard =
      'BEGIN:VCARD\nVERSION:3.0\nN:Doe;Jane;;;\nFN:Jane Doe\nTEL;type=CELL:+5511988887777\nEND:VCARD';
    const card = await build({ to: PEER, content: { kind: 'contact', displayName: 'Jane Doe', vcard } });
    assert.equal(card.content.contactMessage?.displayName, 'Jane Doe');
    assert.equal(card.content.contactMessage?.vcard, vcard);
  });

  it('sticker: the WEBP with its pack metadata (EXIF) is uploaded byte for byte', async () => {
    const pack = { packId: 'parley.pack', packName: 'Parley', packPublisher: 'Acme', emojis: ['😀', '🎉'] };
    const withPack = await withExif(webp, stickerExif(pack));
    const { content, uploads } = await build({
      to: PEER,
      content: { kind: 'sticker', media: { data: withPack, mimetype: 'image/webp' }, animated: false },
    });
    assert.equal(content.stickerMessage?.mimetype, 'image/webp');
    assert.equal(content.stickerMessage?.isAnimated, false);
    const key = content.stickerMessage?.mediaKey;
    assert.ok(key);
    const sent = await decryptUpload(uploads[0]?.bytes ?? Buffer.alloc(0), key, 'sticker');
    assert.deepEqual(sent, withPack);
    assert.deepEqual(await readStickerExif(sent), {
      'sticker-pack-id': 'parley.pack',
      'sticker-pack-name': 'Parley',
      'sticker-pack-publisher': 'Acme',
      emojis: ['😀', '🎉'],
    });
  });

  it('reaction: own messages by the `me:` flag, others with their group sender', async () => {
    const stub = stubUpload();
    const own = await buildReaction(PEER, { id: '3EB0AAAA', fromMe: true }, '👍', deps(stub.upload));
    assert.deepEqual(
      { ...own.message?.reactionMessage?.key },
      { remoteJid: PEER, id: '3EB0AAAA', fromMe: true },
    );
    assert.equal(own.message?.reactionMessage?.text, '👍');
    const theirs = await buildReaction(
      GROUP,
      { id: '3EB0BBBB', fromMe: false, participant: '5511977776666@s.whatsapp.net' },
      '',
      deps(stub.upload),
    );
    assert.equal(theirs.message?.reactionMessage?.key?.participant, '5511977776666@s.whatsapp.net');
    assert.equal(theirs.message?.reactionMessage?.text, '', 'empty removes');
  });

  it('maps what it sent back to the stored content; getMessage rebuilds only exact contents', async () => {
    const text = await build({
      to: PEER,
      content: { kind: 'text', text: 'hello', linkPreview: false },
      quotedId: '3EB0AAAA',
    });
    assert.deepEqual(toMessageContent(text.content), { kind: 'text', text: 'hello', quotedId: '3EB0AAAA' });
    const image = await build({
      to: PEER,
      content: { kind: 'image', media: { data: png, mimetype: 'image/png' } },
    });
    assert.deepEqual(toMessageContent(image.content), {
      kind: 'image',
      mimetype: 'image/png',
      fileLength: png.length,
    });
    assert.deepEqual(resendableProto({ kind: 'text', text: 'x' }), {
      conversation: 'x',
    } satisfies proto.IMessage);
    assert.equal(resendableProto({ kind: 'image' }), undefined);
  });

  it('stores what the sandbox stores for the same send (contentOf): empty captions and names dropped, ptt set', async () => {
    const pdf = { data: Buffer.from('%PDF-1.4 fake'), mimetype: 'application/pdf' };
    const vcard = 'BEGIN:VCARD\nVERSION:3.0\nN:Doe;Jane;;;\nFN:Jane Doe\nTEL:+5511988887777\nEND:VCARD';
    const sends: OutgoingMessage[] = [
      {
        to: PEER,
        content: { kind: 'text', text: 'hi @5511977776666', linkPreview: false },
        mentions: ['5511977776666@s.whatsapp.net'],
      },
      { to: PEER, content: { kind: 'text', text: 'yes', linkPreview: false }, quotedId: '3EB0UNKNOWN' },
      { to: PEER, content: { kind: 'image', media: { data: png, mimetype: 'image/png' }, caption: '' } },
      { to: PEER, content: { kind: 'image', media: { data: png, mimetype: 'image/png' }, caption: 'a pic' } },
      {
        to: PEER,
        content: { kind: 'video', media: { data: Buffer.from('fake mp4'), mimetype: 'video/mp4' } },
      },
      { to: PEER, content: { kind: 'document', media: pdf, fileName: 'a.pdf', caption: '' } },
      { to: PEER, content: { kind: 'document', media: pdf, fileName: '', caption: 'c' } },
      {
        to: PEER,
        content: { kind: 'audio', media: { data: Buffer.from('OggS'), mimetype: 'audio/ogg; codecs=opus' } },
      },
      {
        to: PEER,
        content: { kind: 'audio', media: { data: Buffer.from('ID3'), mimetype: 'audio/mpeg' }, ptt: false },
      },
      {
        to: PEER,
        content: { kind: 'sticker', media: { data: webp, mimetype: 'image/webp' }, animated: false },
      },
      { to: PEER, content: { kind: 'location', latitude: 1, longitude: 2, name: '', address: '' } },
      { to: PEER, content: { kind: 'location', latitude: 1, longitude: 2, name: 'Here', address: 'There' } },
      { to: PEER, content: { kind: 'contact', displayName: '', vcard } },
      { to: PEER, content: { kind: 'poll', name: 'Lunch?', options: ['yes', 'no'], selectableCount: 1 } },
    ];
    for (const send of sends) {
      const live = toMessageContent((await build(send)).content);
      assert.deepEqual(contentOf(send.content, send.quotedId, send.mentions), live, JSON.stringify(live));
    }
  });
});
