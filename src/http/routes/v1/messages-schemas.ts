import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { InstanceSelector, Phone, responses } from '../../schemas.ts';

/** Longest text `body` and caption, characters (docs/decisions/0001-envelope-and-error-codes.md). */
export const MAX_TEXT = 65_536;
/** Most message ids one `POST /v1/messages/read` may carry (docs/decisions/0020-security-promises.md). */
export const MAX_READ_IDS = 1000;
/** Most emojis a sticker may carry in its pack metadata. */
export const MAX_STICKER_EMOJIS = 10;

/**
 * The chat a message goes to: a phone number (8 to 15 digits, docs/decisions/0001-envelope-and-error-codes.md), a
 * group JID `<digits>@g.us` (`<digits>-<digits>@g.us` for old groups), so groups the account belongs to can be
 * written to as well, or a user's LID `<digits>@lid` (1 to 20 digits, docs/decisions/0038-lid-mappings.md), so a
 * user known only by LID can be answered.
 */
export const ChatAddress = (
  description = 'recipient phone number (digits only), a group JID, or a user LID (`<digits>@lid`)',
) =>
  Type.String({
    pattern: '^([0-9]{8,15}|[0-9]{1,40}(-[0-9]{1,40})?@g\\.us|[0-9]{1,20}@lid)$',
    'x-message': '{field} must be digits only, international format, no leading +',
    description,
    examples: ['5511988887777'],
  });

const ReplyId = Type.Optional(
  Type.String({
    minLength: 1,
    maxLength: 128,
    description: 'id of a message in the same chat to quote as a reply',
    examples: ['3EB0C767D26A1D2E5B3A61'],
  }),
);
const From = Type.Optional({
  ...InstanceSelector,
  description: 'sending instance: its UUID or linked phone number; omitted: the most recently connected',
  examples: ['5511999990001'],
});
const Caption = Type.Optional(
  Type.String({
    maxLength: MAX_TEXT,
    description: 'caption shown under the media',
    examples: ['Our new menu'],
  }),
);
/**
 * `sendAt` of a send: when to relay it (RFC 3339, in the future, at most 30 days ahead). Given, the send is
 * queued and answered 202 (docs/decisions/0009-sends-as-jobs.md).
 */
export const SendAt = Type.Optional(
  Type.String({
    format: 'date-time',
    'x-message': '{field} must be a date-time in RFC 3339 format',
    description:
      'relay the message at this time (RFC 3339, future, at most 30 days ahead); the answer is then 202 Queued',
    examples: ['2026-12-01T09:00:00Z'],
  }),
);

/** Most users one text or caption may mention. */
export const MAX_MENTIONS = 256;

/**
 * `mentions` of a text or caption (WhatsApp's contextInfo.mentionedJid): phone numbers, each of which must be
 * written `@<phone>` in the text so the recipient's app can highlight it.
 */
export const Mentions = Type.Optional(
  Type.Array(Phone('a mentioned user: phone number, digits only', '5511977776666'), {
    maxItems: MAX_MENTIONS,
    description: 'phone numbers mentioned; each must appear in the text as @<phone>',
    examples: [['5511977776666']],
  }),
);

const Media = (example: string, description: string) =>
  Type.String({
    minLength: 1,
    description: `${description}: an https:// URL or a data: URI (base64); the format is read from the bytes`,
    examples: [example],
    'x-message': '{field} must be an https:// URL or a data: URI',
  });

/**
 * Body of `POST /v1/messages/send` (docs/api.md#messages; docs/decisions/0001-envelope-and-error-codes.md: body at
 * most 65,536 characters).
 */
export const SendTextBody = Type.Object(
  {
    phone: ChatAddress(),
    body: Type.String({
      minLength: 1,
      maxLength: MAX_TEXT,
      description: 'text; *bold*, _italic_, ~strikethrough~, ```monospace```',
      examples: ['Hello *world*'],
    }),
    id: ReplyId,
    mentions: Mentions,
    linkPreview: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          "show a preview card for the first link in the text; on live instances its title is the link's host name (parley does not fetch the page)",
      }),
    ),
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendTextBody' },
);
export type SendTextBody = Static<typeof SendTextBody>;

/**
 * Body of `POST /v1/messages/send/image` (docs/api.md#messages; docs/decisions/0017-messages-and-media.md: JPEG, PNG,
 * GIF, WEBP; 16 MB; 32,000,000 pixels).
 */
export const SendImageBody = Type.Object(
  {
    phone: ChatAddress(),
    image: Media(
      'https://example.com/photo.jpg',
      'JPEG, PNG, GIF or WEBP, at most 16 MB and 32,000,000 pixels (width × height)',
    ),
    caption: Caption,
    mentions: Mentions,
    id: ReplyId,
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendImageBody' },
);
export type SendImageBody = Static<typeof SendImageBody>;

/**
 * Body of `POST /v1/messages/send/document` (docs/api.md#messages; docs/decisions/0017-messages-and-media.md: any
 * format, 100 MB).
 */
export const SendDocumentBody = Type.Object(
  {
    phone: ChatAddress(),
    document: Media('data:application/pdf;base64,JVBERi0xLjQK…', 'any format, at most 100 MB'),
    fileName: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'display name; defaults to the last segment of the URL, else `file.<ext>`',
        examples: ['invoice-2025-01.pdf'],
      }),
    ),
    caption: Caption,
    mentions: Mentions,
    id: ReplyId,
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendDocumentBody' },
);
export type SendDocumentBody = Static<typeof SendDocumentBody>;

/**
 * Body of `POST /v1/messages/send/audio` (docs/api.md#messages; docs/decisions/0017-messages-and-media.md: OGG/Opus,
 * MP3, M4A, WAV; voice note).
 */
export const SendAudioBody = Type.Object(
  {
    phone: ChatAddress(),
    audio: Media('data:audio/ogg;base64,T2dnUwACAAAAAAAA…', 'OGG (Opus), MP3, M4A or WAV, at most 16 MB'),
    id: ReplyId,
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendAudioBody' },
);
export type SendAudioBody = Static<typeof SendAudioBody>;

/** Body of `POST /v1/messages/send/video` (docs/decisions/0017-messages-and-media.md: MP4, 3GP; 16 MB). */
export const SendVideoBody = Type.Object(
  {
    phone: ChatAddress(),
    video: Media('https://example.com/clip.mp4', 'MP4 or 3GP, at most 16 MB'),
    caption: Caption,
    mentions: Mentions,
    id: ReplyId,
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendVideoBody' },
);
export type SendVideoBody = Static<typeof SendVideoBody>;

/**
 * Body of `POST /v1/messages/send/location` (docs/decisions/0017-messages-and-media.md: latitude −90..90, longitude
 * −180..180).
 */
export const SendLocationBody = Type.Object(
  {
    phone: ChatAddress(),
    latitude: Type.Number({
      minimum: -90,
      maximum: 90,
      'x-message': '{field} must be a number from -90 to 90',
      examples: [-23.5613],
    }),
    longitude: Type.Number({
      minimum: -180,
      maximum: 180,
      'x-message': '{field} must be a number from -180 to 180',
      examples: [-46.6565],
    }),
    name: Type.Optional(Type.String({ maxLength: 256, examples: ['Avenida Paulista'] })),
    address: Type.Optional(
      Type.String({ maxLength: 1024, examples: ['Av. Paulista, 1578 - Bela Vista, São Paulo'] }),
    ),
    id: ReplyId,
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendLocationBody' },
);
export type SendLocationBody = Static<typeof SendLocationBody>;

/**
 * Body of `POST /v1/messages/send/sticker` (docs/api.md#messages; docs/decisions/0017-messages-and-media.md: pack
 * metadata in the WEBP EXIF).
 */
export const SendStickerBody = Type.Object(
  {
    phone: ChatAddress(),
    sticker: Media(
      'data:image/webp;base64,UklGRlYAAABXRUJQ…',
      'static WEBP/PNG/JPEG/GIF or animated MP4/WEBP/GIF, at most 500 KB; converted to a 512×512 WEBP',
    ),
    packName: Type.Optional(Type.String({ maxLength: 128, examples: ['parley stickers'] })),
    packId: Type.Optional(Type.String({ maxLength: 128, examples: ['com.example.stickers'] })),
    packPublisher: Type.Optional(Type.String({ maxLength: 128, examples: ['Example Inc.'] })),
    emojis: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 16 }), {
        maxItems: MAX_STICKER_EMOJIS,
        examples: [['😀', '🎉']],
      }),
    ),
    id: ReplyId,
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendStickerBody' },
);
export type SendStickerBody = Static<typeof SendStickerBody>;

/**
 * Body of `POST /v1/messages/send/contact` (docs/api.md#messages; docs/decisions/0017-messages-and-media.md: vCard
 * lines).
 */
export const SendContactBody = Type.Object(
  {
    phone: ChatAddress(),
    name: Type.String({ minLength: 1, maxLength: 256, description: 'display name', examples: ['Ana Souza'] }),
    vcard: Type.String({
      minLength: 1,
      maxLength: 16_384,
      description: 'vCard 3.0 text with BEGIN:VCARD, N, FN, TEL and END:VCARD lines, separated by newlines',
      examples: [
        'BEGIN:VCARD\nVERSION:3.0\nN:Souza;Ana;;;\nFN:Ana Souza\nTEL;type=CELL;waid=5511999990000:+55 11 99999-0000\nEND:VCARD',
      ],
    }),
    id: ReplyId,
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendContactBody' },
);
export type SendContactBody = Static<typeof SendContactBody>;

/** Body of `POST /v1/messages/react` (docs/api.md#messages): `id` prefixed `me:` for the account's own messages. */
export const ReactBody = Type.Object(
  {
    phone: ChatAddress('the chat of the message: phone number or group JID'),
    id: Type.String({
      minLength: 1,
      maxLength: 131,
      description: 'id of the message; prefix `me:` for a message the account sent',
      examples: ['me:3EB0C767D26A1D2E5B3A61'],
    }),
    body: Type.String({
      maxLength: 32,
      description: 'one emoji; an empty string removes the reaction',
      examples: ['👍'],
    }),
    senderPhone: Type.Optional(
      Phone('group chats: who sent the message (looked up in the message store when omitted)'),
    ),
    from: From,
  },
  { title: 'ReactBody' },
);
export type ReactBody = Static<typeof ReactBody>;

/**
 * Body of `POST /v1/messages/read` (docs/api.md#messages; docs/decisions/0020-security-promises.md: at most 1,000
 * ids).
 */
export const ReadBody = Type.Object(
  {
    id: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
      minItems: 1,
      maxItems: MAX_READ_IDS,
      description: 'ids of received messages to mark as read',
      examples: [['3A6D5E0F9C1B2A3D4E5F']],
    }),
    chatPhone: ChatAddress('the chat: the sender’s phone number, or the group JID for a group chat'),
    senderPhone: Type.Optional(Phone('who sent the messages; required when chatPhone is a group JID')),
    from: From,
  },
  { title: 'ReadBody' },
);
export type ReadBody = Static<typeof ReadBody>;

/** `data` of a 202 answer to a queued or scheduled send (docs/decisions/0009-sends-as-jobs.md). */
export const QueuedResult = Type.Object(
  {
    details: Type.Literal('Queued'),
    id: Type.String({
      description: 'id the message will have on the platform',
      examples: ['3EB0C767D26A1D2E5B3A61'],
    }),
    status: Type.Literal('pending'),
    sendAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'when it is due; null: as soon as the queue allows',
    }),
  },
  { title: 'QueuedResult' },
);
export type QueuedResult = Static<typeof QueuedResult>;

/** Send result (docs/api.md#messages; docs/decisions/0017-messages-and-media.md): `timestamp` RFC 3339 UTC. */
export const SendResult = Type.Object(
  {
    details: Type.String({ examples: ['Sent'] }),
    id: Type.String({
      description: 'id of the new message (reactions: the target)',
      examples: ['3EB0C767D26A1D2E5B3A61'],
    }),
    timestamp: Type.String({ format: 'date-time', examples: ['2025-01-15T12:00:00.000Z'] }),
  },
  { title: 'SendResult' },
);
export type SendResult = Static<typeof SendResult>;

/**
 * Response schemas of a message-creating send: 200 `Sent` (the default, after the relay), 202 `Queued` (with
 * `Prefer: respond-async` or `sendAt`), the common errors and the route's own `statuses`.
 */
export function sendResponses(description: string, ...statuses: number[]): Record<number, TSchema> {
  return {
    ...responses(description, SendResult, 409, ...statuses),
    202: Type.Object(
      { success: Type.Literal(true), code: Type.Literal(202), data: QueuedResult },
      {
        description:
          'Queued (Prefer: respond-async, or sendAt): stored as pending; the outcome arrives as a MessageStatus event',
      },
    ),
  };
}

/**
 * Body of `POST /v1/messages/forward` (docs/api.md#messages; docs/decisions/0041-forward-calls-channels.md): a stored
 * message of the instance, sent to `phone` marked forwarded.
 */
export const ForwardBody = Type.Object(
  {
    phone: ChatAddress('the chat to forward to: phone number, group JID or user LID'),
    messageId: Type.String({
      minLength: 1,
      maxLength: 128,
      description: 'id of a stored message of this instance (sent or received, in any chat)',
      examples: ['3EB0C767D26A1D2E5B3A61'],
    }),
    from: From,
    sendAt: SendAt,
  },
  { title: 'ForwardBody' },
);
export type ForwardBody = Static<typeof ForwardBody>;
