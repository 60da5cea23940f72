/**
 * Control API, rich content a simulated user sends to a linked account, Signal-encrypted to every linked device
 * of the account (messaging/send.ts):
 * - `POST /control/media`: an image, video, audio (voice note or not), document or sticker. The user's phone
 *   encrypts the bytes (media/crypto.ts), stores the encrypted file on the media server, and sends the media
 *   message as Baileys' Utils/messages.js prepareWAMessageMedia shapes it (`url`, `directPath`, `mediaKey`,
 *   `fileSha256`, `fileEncSha256`, `fileLength`, `mediaKeyTimestamp`, plus mimetype, caption, file name, ptt).
 *   The phone keeps the encrypted file (`User.keptMedia`) to upload it again on request (messaging/media-retry.ts).
 * - `POST /control/location`: a `locationMessage` (degrees, name, address).
 * - `POST /control/contact`: a `contactMessage` (display name and vCard).
 * And what a user received: `GET /control/users/{phone}/inbox/{id}/media`, the decrypted bytes of a media
 * message in the user's inbox (media/receive.ts).
 */
import { type Static, Type } from '@sinclair/typebox';
import type { proto } from 'baileys';
import type { FastifyInstance } from 'fastify';
import { encryptMedia, type MediaType } from '../media/crypto.ts';
import { decryptedMedia } from '../media/receive.ts';
import { sendMessage } from '../messaging/send.ts';
import { phoneJid } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { Phone } from './schemas.ts';

/** Largest media a simulated user sends, bytes (decoded): the platform's 16 MB media limit. */
export const MAX_MEDIA_BYTES = 16 * 1024 * 1024;

/** Default mimetype per kind (Baileys Utils/messages.js `MIMETYPE_MAP`). */
const DEFAULT_MIMETYPE: Record<MediaType, string> = {
  image: 'image/jpeg',
  video: 'video/mp4',
  audio: 'audio/ogg; codecs=opus',
  document: 'application/pdf',
  sticker: 'image/webp',
};

const MediaBody = Type.Object(
  {
    from: Phone,
    to: Phone,
    kind: Type.Unsafe<MediaType>({
      type: 'string',
      enum: ['image', 'video', 'audio', 'document', 'sticker'],
      description: 'the media kind',
    }),
    data: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9+/]+={0,2}$', description: 'the bytes, base64' }),
    mimetype: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    caption: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    fileName: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    ptt: Type.Optional(Type.Boolean()),
    quotedId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);

type MediaRequest = Static<typeof MediaBody>;

const InboxMediaParams = Type.Object({
  phone: Phone,
  id: Type.String({ minLength: 1, maxLength: 128 }),
});

const LocationBody = Type.Object(
  {
    from: Phone,
    to: Phone,
    latitude: Type.Number({ minimum: -90, maximum: 90 }),
    longitude: Type.Number({ minimum: -180, maximum: 180 }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    address: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    quotedId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);

const ContactBody = Type.Object(
  {
    from: Phone,
    to: Phone,
    displayName: Type.String({ minLength: 1, maxLength: 1024 }),
    vcard: Type.String({ minLength: 1, maxLength: 65536 }),
    quotedId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);

function checkFields(body: MediaRequest): void {
  if (body.caption !== undefined && (body.kind === 'audio' || body.kind === 'sticker'))
    throw new ControlError(400, `caption: not allowed for kind "${body.kind}"`);
  if (body.fileName !== undefined && body.kind !== 'document')
    throw new ControlError(400, 'fileName: only allowed for kind "document"');
  if (body.ptt !== undefined && body.kind !== 'audio')
    throw new ControlError(400, 'ptt: only allowed for kind "audio"');
}

/** `contextInfo` of a reply to `quotedId` in the chat with the account (none without a quoted id). */
export const quote = (quotedId: string | undefined, accountJid: string) =>
  quotedId ? { contextInfo: { stanzaId: quotedId, participant: accountJid } } : {};

/** The media message (one of `imageMessage`, …) for `body`, its file stored on the media server. */
function mediaMessage(
  ctx: SimContext,
  body: MediaRequest,
  bytes: Buffer,
  accountJid: string,
): proto.IMessage {
  const media = ctx.media;
  if (!media) throw new ControlError(501, 'kind: the simulator runs no media server');
  const encrypted = encryptMedia(bytes, body.kind);
  const stored = media.put(body.kind === 'sticker' ? 'image' : body.kind, encrypted.file);
  // The phone keeps what it sent, to upload it again when a device asks (messaging/media-retry.ts).
  const sender = ctx.accounts.require(body.from, 'from');
  sender.keptMedia ??= new Map();
  sender.keptMedia.set(encrypted.fileEncSha256.toString('base64'), encrypted.file);
  const part = {
    url: stored.url,
    directPath: stored.directPath,
    mediaKey: encrypted.mediaKey,
    fileSha256: encrypted.fileSha256,
    fileEncSha256: encrypted.fileEncSha256,
    fileLength: encrypted.fileLength,
    mediaKeyTimestamp: Math.floor(Date.now() / 1000),
    mimetype: body.mimetype ?? DEFAULT_MIMETYPE[body.kind],
    ...(body.caption !== undefined ? { caption: body.caption } : {}),
    ...quote(body.quotedId, accountJid),
  };
  switch (body.kind) {
    case 'image':
      return { imageMessage: part };
    case 'video':
      return { videoMessage: part };
    case 'audio':
      return { audioMessage: { ...part, ptt: body.ptt ?? false } };
    case 'document':
      return { documentMessage: { ...part, fileName: body.fileName ?? 'file' } };
    case 'sticker':
      return { stickerMessage: part };
  }
}

/**
 * Sends `build(accountJid)` from `from` to the account `to` and answers `201 { id, devices, online }`.
 * Throws ControlError 400 (same user), 404 (unknown user), 409 (unregistered, no linked device).
 */
export async function sendFromUser(
  ctx: SimContext,
  from: string,
  to: string,
  build: (accountJid: string) => proto.IMessage,
) {
  const sender = ctx.accounts.require(from, 'from');
  const account = ctx.accounts.require(to, 'to');
  if (sender === account) throw new ControlError(400, 'to: must differ from from');
  if (!account.registered) throw new ControlError(409, `to: ${to} is not registered`);
  const result = await sendMessage(ctx.signalQueue, sender, account, build(phoneJid(account.phone)));
  if (result.devices === 0) throw new ControlError(409, `to: account ${to} has no linked device`);
  return result;
}

/** Registers `POST /control/media`, `/control/location` and `/control/contact`. */
export function registerContentRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Body: MediaRequest }>(
    '/control/media',
    // base64 of the largest media plus the other fields
    { schema: { body: MediaBody }, bodyLimit: Math.ceil((MAX_MEDIA_BYTES * 4) / 3) + 64 * 1024 },
    async (request, reply) => {
      const body = request.body;
      checkFields(body);
      const bytes = Buffer.from(body.data, 'base64');
      if (bytes.length > MAX_MEDIA_BYTES)
        throw new ControlError(413, `data: over ${MAX_MEDIA_BYTES} bytes once decoded`);
      const result = await sendFromUser(ctx, body.from, body.to, (jid) =>
        mediaMessage(ctx, body, bytes, jid),
      );
      return reply.status(201).send(result);
    },
  );

  app.get<{ Params: Static<typeof InboxMediaParams> }>(
    '/control/users/:phone/inbox/:id/media',
    { schema: { params: InboxMediaParams } },
    async (request, reply) => {
      const { phone, id } = request.params;
      const user = ctx.accounts.require(phone, 'phone');
      const entry = user.inbox.findLast((e) => e.id === id && e.media !== undefined);
      if (!entry) throw new ControlError(404, `id: no media message ${id} in the inbox of ${phone}`);
      if (entry.media && 'error' in entry.media)
        throw new ControlError(409, `id: the media of ${id} did not decrypt (${entry.media.error})`);
      const bytes = await decryptedMedia(entry, ctx.media);
      if (!bytes) throw new ControlError(404, `id: no media message ${id} in the inbox of ${phone}`);
      return reply.type(entry.mimetype ?? 'application/octet-stream').send(bytes);
    },
  );

  app.post<{ Body: Static<typeof LocationBody> }>(
    '/control/location',
    { schema: { body: LocationBody } },
    async (request, reply) => {
      const { from, to, latitude, longitude, name, address, quotedId } = request.body;
      const result = await sendFromUser(ctx, from, to, (jid) => ({
        locationMessage: {
          degreesLatitude: latitude,
          degreesLongitude: longitude,
          ...(name !== undefined ? { name } : {}),
          ...(address !== undefined ? { address } : {}),
          ...quote(quotedId, jid),
        },
      }));
      return reply.status(201).send(result);
    },
  );

  app.post<{ Body: Static<typeof ContactBody> }>(
    '/control/contact',
    { schema: { body: ContactBody } },
    async (request, reply) => {
      const { from, to, displayName, vcard, quotedId } = request.body;
      const result = await sendFromUser(ctx, from, to, (jid) => ({
        contactMessage: { displayName, vcard, ...quote(quotedId, jid) },
      }));
      return reply.status(201).send(result);
    },
  );
}
