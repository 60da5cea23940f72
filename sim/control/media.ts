/**
 * Control API, media: `POST /control/media` — a simulated user sends an image, video, audio (voice note or
 * not), document or sticker to a linked account. The user's phone encrypts the bytes (media/crypto.ts),
 * stores the encrypted file on the media server, and sends the media message as Baileys'
 * Utils/messages.js prepareWAMessageMedia shapes it (`url`, `directPath`, `mediaKey`, `fileSha256`,
 * `fileEncSha256`, `fileLength`, `mediaKeyTimestamp`, plus mimetype, caption, file name, ptt), Signal-encrypted
 * to every linked device of the account (messaging/send.ts).
 */
import { type Static, Type } from '@sinclair/typebox';
import type { proto } from 'baileys';
import type { FastifyInstance } from 'fastify';
import { encryptMedia, type MediaType } from '../media/crypto.ts';
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

function checkFields(body: MediaRequest): void {
  if (body.caption !== undefined && (body.kind === 'audio' || body.kind === 'sticker'))
    throw new ControlError(400, `caption: not allowed for kind "${body.kind}"`);
  if (body.fileName !== undefined && body.kind !== 'document')
    throw new ControlError(400, 'fileName: only allowed for kind "document"');
  if (body.ptt !== undefined && body.kind !== 'audio')
    throw new ControlError(400, 'ptt: only allowed for kind "audio"');
}

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
    ...(body.quotedId ? { contextInfo: { stanzaId: body.quotedId, participant: accountJid } } : {}),
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

/** Registers `POST /control/media`. */
export function registerMediaRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Body: MediaRequest }>(
    '/control/media',
    // base64 of the largest media plus the other fields
    { schema: { body: MediaBody }, bodyLimit: Math.ceil((MAX_MEDIA_BYTES * 4) / 3) + 64 * 1024 },
    async (request, reply) => {
      const body = request.body;
      checkFields(body);
      const sender = ctx.accounts.require(body.from, 'from');
      const account = ctx.accounts.require(body.to, 'to');
      if (sender === account) throw new ControlError(400, 'to: must differ from from');
      if (!account.registered) throw new ControlError(409, `to: ${body.to} is not registered`);
      const bytes = Buffer.from(body.data, 'base64');
      if (bytes.length > MAX_MEDIA_BYTES)
        throw new ControlError(413, `data: over ${MAX_MEDIA_BYTES} bytes once decoded`);
      const message = mediaMessage(ctx, body, bytes, phoneJid(account.phone));
      const result = await sendMessage(ctx.signalQueue, sender, account, message);
      if (result.devices === 0) throw new ControlError(409, `to: account ${body.to} has no linked device`);
      return reply.status(201).send(result);
    },
  );
}
