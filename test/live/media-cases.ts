import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import { detectFormat } from '../../src/media/detect.ts';
import { Ffmpeg } from '../../src/media/ffmpeg.ts';
import { makeSticker } from '../../src/media/sticker.ts';

/**
 * The sends of the live media test (media.test.ts): each kind's request body and what the simulated recipient must
 * have decrypted, its bytes compared by hash and length, stickers by the bytes parley's own sticker code makes.
 */

/** The bytes of test/fixtures/media/`name`. */
export const fixture = (name: string): Buffer =>
  readFileSync(new URL(`../fixtures/media/${name}`, import.meta.url));
/** A data: URI of fixture `name` typed `mime`. */
export const dataUri = (name: string, mime: string): string =>
  `data:${mime};base64,${fixture(name).toString('base64')}`;
/** The SHA-256 of `data`, hex. */
const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');
/** What the simulated recipient reports of media it decrypted to `data`: its SHA-256 (hex) and length (bytes). */
export const decrypted = (data: Buffer): { sha256: string; length: number } => ({
  sha256: sha256(data),
  length: data.length,
});

/** A contact card (vCard 3.0) for Ana Souza, with her WhatsApp id. */
export const VCARD =
  'BEGIN:VCARD\nVERSION:3.0\nN:Souza;Ana;;;\nFN:Ana Souza\nTEL;type=CELL;waid=5511988887777:+55 11 98888-7777\nEND:VCARD';

/** The sticker parley makes of `name` with `meta` (same code path, so the bytes are the ones it sends). */
async function expectedSticker(name: string, meta: Parameters<typeof makeSticker>[2]): Promise<Buffer> {
  const data = fixture(name);
  const format = await detectFormat(data);
  assert.ok(format);
  return (await makeSticker(data, format, meta, new Ffmpeg())).data;
}

/** One send operation: its /v1 path, request body (without phone), and what the recipient must have decrypted. */
export interface SendCase {
  kind: 'image' | 'document' | 'audio' | 'video' | 'sticker' | 'location' | 'contact';
  body: Record<string, unknown>;
  expected: () => Promise<Partial<InboxEntry>>;
}

/** Every send kind once: an image, a document, audio, video, a sticker, a location and a contact card. */
export const CASES: SendCase[] = [
  {
    kind: 'image',
    body: { image: dataUri('tiny.jpg', 'image/jpeg'), caption: 'Your receipt' },
    expected: async () => ({
      type: 'image',
      caption: 'Your receipt',
      mimetype: 'image/jpeg',
      media: decrypted(fixture('tiny.jpg')),
    }),
  },
  {
    kind: 'document',
    body: { document: dataUri('doc.pdf', 'application/pdf'), fileName: 'invoice-42.pdf', caption: 'Invoice' },
    expected: async () => ({
      type: 'document',
      caption: 'Invoice',
      mimetype: 'application/pdf',
      fileName: 'invoice-42.pdf',
      media: decrypted(fixture('doc.pdf')),
    }),
  },
  {
    kind: 'audio',
    body: { audio: dataUri('voice.ogg', 'audio/ogg') },
    expected: async () => ({
      type: 'audio',
      mimetype: 'audio/ogg; codecs=opus',
      ptt: true,
      media: decrypted(fixture('voice.ogg')),
    }),
  },
  {
    kind: 'video',
    body: { video: dataUri('clip.mp4', 'video/mp4'), caption: 'How to assemble it' },
    expected: async () => ({
      type: 'video',
      caption: 'How to assemble it',
      mimetype: 'video/mp4',
      media: decrypted(fixture('clip.mp4')),
    }),
  },
  {
    kind: 'sticker',
    body: {
      sticker: dataUri('tiny.webp', 'image/webp'),
      packName: 'Shop pack',
      packPublisher: 'Shop',
      packId: 'shop.pack.1',
      emojis: ['📦', '🎉'],
    },
    expected: async () => ({
      type: 'sticker',
      mimetype: 'image/webp',
      animated: false,
      media: decrypted(
        await expectedSticker('tiny.webp', {
          packName: 'Shop pack',
          packPublisher: 'Shop',
          packId: 'shop.pack.1',
          emojis: ['📦', '🎉'],
        }),
      ),
      sticker: { packId: 'shop.pack.1', packName: 'Shop pack', packPublisher: 'Shop', emojis: ['📦', '🎉'] },
    }),
  },
  {
    kind: 'location',
    body: { latitude: -23.5505, longitude: -46.6333, name: 'Shop', address: 'Praça da Sé, São Paulo' },
    expected: async () => ({
      type: 'location',
      location: { latitude: -23.5505, longitude: -46.6333, name: 'Shop', address: 'Praça da Sé, São Paulo' },
    }),
  },
  {
    kind: 'contact',
    body: { name: 'Ana Souza', vcard: VCARD },
    expected: async () => ({ type: 'contact', contacts: [{ displayName: 'Ana Souza', vcard: VCARD }] }),
  },
];
