/**
 * A simulated user's inbox: what its phone received from linked accounts, decrypted, oldest first. Messages
 * are read from the decrypted proto.Message as Baileys builds them (Utils/messages.js generateWAMessageContent):
 * text as `conversation` or `extendedTextMessage` (a reply's quoted id in `contextInfo.stanzaId`), reactions as
 * `reactionMessage`, media as `imageMessage`/`videoMessage`/… with `caption`, `mimetype`, `fileName`, `ptt`
 * (the decrypted bytes are added by media/receive.ts), locations with their fields, contact cards with their
 * vCards. Receipts the
 * account sends for the user's messages are entries too (`type: "receipt"`).
 */
import type { proto } from 'baileys';

/** One inbox entry. `from` is the sending account's phone (digits), `fromDevice` its device id. */
export interface InboxEntry {
  /** Message id (receipts: the first acknowledged id). */
  id: string;
  /**
   * How many more copies of this message (same id, same sender) arrived after the first: a phone shows a message
   * once per id, so a copy is counted here instead of becoming another entry. Absent when none did.
   */
  copies?: number;
  from: string;
  fromDevice: number;
  /**
   * `text`, `reaction`, `image`, `video`, `audio`, `document`, `sticker`, `location`, `contact`, `poll`, `revoke`,
   * `edit`, `receipt`, `chatstate` (the account is typing, recording or paused in the user's chat), `call-reject`
   * (the account declined the user's call; `id` is the call id), `other`.
   */
  type: string;
  /** ISO 8601 time the simulator took the stanza. */
  timestamp: string;
  text?: string;
  caption?: string;
  mimetype?: string;
  /** Id of the message this one replies to. */
  quotedId?: string;
  /** Reactions: the message reacted to and the emoji ('' removes the reaction). */
  reaction?: { id: string; text: string };
  /** Revokes and edits: the id of the message revoked or edited. */
  targetId?: string;
  /** Group messages and receipts: the group JID (`…@g.us`); absent for 1:1. */
  group?: string;
  /**
   * Status updates (stories) the user's phone received (messaging/status-relay.ts): true; absent for chat
   * messages. `viewedAt` (ISO 8601) is set once the phone viewed it and sent the poster a read receipt.
   */
  status?: true;
  viewedAt?: string;
  /**
   * Texts: the `extendedTextMessage` background colour (`backgroundArgb`, 0xAARRGGBB unsigned) and `font`
   * (WhatsApp's FontType number) a status text carries, when set.
   */
  backgroundArgb?: number;
  font?: number;
  /** Receipts: `delivery`, `read`, `played`, … and every id acknowledged. */
  receipt?: string;
  ids?: string[];
  /** Documents: the file name the message carries. */
  fileName?: string;
  /** Audio: true for a voice note (push-to-talk). */
  ptt?: boolean;
  /** Stickers: true when the message says the sticker is animated. */
  animated?: boolean;
  /**
   * Media: what the user's phone downloaded from the media server and decrypted (media/receive.ts): SHA-256
   * (hex) and length in bytes of the plaintext, or `error` naming the check that failed (download, hash, MAC).
   */
  media?: { sha256: string; length: number } | { error: string };
  /** Stickers: the pack metadata in the decrypted WEBP's EXIF (`sticker-pack-*`, `emojis`), when present. */
  sticker?: { packId?: string; packName?: string; packPublisher?: string; emojis?: string[] };
  /** Locations: coordinates in degrees, and the place's name and address when given. */
  location?: { latitude: number; longitude: number; name?: string; address?: string };
  /** Contact cards: one entry per card, as sent (a single card or a contacts array). */
  contacts?: { displayName: string; vcard: string }[];
  /** Texts and captions: the JIDs in `contextInfo.mentionedJid`, as sent. */
  mentions?: string[];
  /** Polls: the question, the option names in order, and how many a voter may pick (0 = any). */
  poll?: { name: string; options: string[]; selectableCount: number };
  /** Chat states: `composing`, `recording` (composing with media audio) or `paused`. */
  state?: string;
  /**
   * Texts and media marked forwarded (`contextInfo.isForwarded`): the `contextInfo.forwardingScore` (how many times
   * the message was forwarded; 1 when the score is missing).
   */
  forwardingScore?: number;
}

/** The `mentionedJid` of a context info, when it has any, and its forwarding score when it is marked forwarded. */
function mentionsOf(info: proto.IContextInfo | null | undefined): {
  mentions?: string[];
  forwardingScore?: number;
} {
  return {
    ...(info?.mentionedJid?.length ? { mentions: [...info.mentionedJid] } : {}),
    ...(info?.isForwarded ? { forwardingScore: info.forwardingScore ?? 1 } : {}),
  };
}

type MediaKey = 'imageMessage' | 'videoMessage' | 'audioMessage' | 'documentMessage' | 'stickerMessage';
const MEDIA: [MediaKey, string][] = [
  ['imageMessage', 'image'],
  ['videoMessage', 'video'],
  ['audioMessage', 'audio'],
  ['documentMessage', 'document'],
  ['stickerMessage', 'sticker'],
];

/** Unwraps the envelopes a message may come in (ephemeral, view-once, document-with-caption). */
function unwrap(message: proto.IMessage): proto.IMessage {
  const inner =
    message.ephemeralMessage?.message ??
    message.viewOnceMessage?.message ??
    message.viewOnceMessageV2?.message ??
    message.documentWithCaptionMessage?.message;
  return inner ? unwrap(inner) : message;
}

/** The inbox view of a decrypted message. */
export function entryFromMessage(
  base: Pick<InboxEntry, 'id' | 'from' | 'fromDevice' | 'timestamp'>,
  received: proto.IMessage,
): InboxEntry {
  const message = unwrap(received);
  if (message.conversation) return { ...base, type: 'text', text: message.conversation };
  if (message.extendedTextMessage) {
    const { backgroundArgb, font } = message.extendedTextMessage;
    const entry: InboxEntry = {
      ...base,
      type: 'text',
      text: message.extendedTextMessage.text ?? '',
      ...mentionsOf(message.extendedTextMessage.contextInfo),
      ...(typeof backgroundArgb === 'number' ? { backgroundArgb } : {}),
      ...(typeof font === 'number' ? { font } : {}),
    };
    const quoted = message.extendedTextMessage.contextInfo?.stanzaId;
    if (quoted) entry.quotedId = quoted;
    return entry;
  }
  if (message.reactionMessage) {
    return {
      ...base,
      type: 'reaction',
      reaction: { id: message.reactionMessage.key?.id ?? '', text: message.reactionMessage.text ?? '' },
    };
  }
  const protocol = message.protocolMessage;
  if (protocol?.type === 0) return { ...base, type: 'revoke', targetId: protocol.key?.id ?? '' };
  if (protocol?.editedMessage) {
    const text = protocol.editedMessage.conversation ?? protocol.editedMessage.extendedTextMessage?.text;
    return { ...base, type: 'edit', targetId: protocol.key?.id ?? '', ...(text ? { text } : {}) };
  }
  for (const [key, type] of MEDIA) {
    const media = message[key];
    if (!media) continue;
    const entry: InboxEntry = { ...base, type, ...mentionsOf(media.contextInfo) };
    if ('caption' in media && media.caption) entry.caption = media.caption;
    if (media.mimetype) entry.mimetype = media.mimetype;
    if ('fileName' in media && media.fileName) entry.fileName = media.fileName;
    if ('ptt' in media && typeof media.ptt === 'boolean') entry.ptt = media.ptt;
    if ('isAnimated' in media && typeof media.isAnimated === 'boolean') entry.animated = media.isAnimated;
    const quoted = media.contextInfo?.stanzaId;
    if (quoted) entry.quotedId = quoted;
    return entry;
  }
  const location = message.locationMessage;
  if (location) {
    const entry: InboxEntry = {
      ...base,
      type: 'location',
      location: {
        latitude: location.degreesLatitude ?? 0,
        longitude: location.degreesLongitude ?? 0,
        ...(location.name ? { name: location.name } : {}),
        ...(location.address ? { address: location.address } : {}),
      },
    };
    const quoted = location.contextInfo?.stanzaId;
    if (quoted) entry.quotedId = quoted;
    return entry;
  }
  const cards = message.contactMessage ? [message.contactMessage] : message.contactsArrayMessage?.contacts;
  if (cards) {
    const entry: InboxEntry = {
      ...base,
      type: 'contact',
      contacts: cards.map((c) => ({ displayName: c.displayName ?? '', vcard: c.vcard ?? '' })),
    };
    const quoted =
      message.contactMessage?.contextInfo?.stanzaId ?? message.contactsArrayMessage?.contextInfo?.stanzaId;
    if (quoted) entry.quotedId = quoted;
    return entry;
  }
  const poll = message.pollCreationMessage ?? message.pollCreationMessageV2 ?? message.pollCreationMessageV3;
  if (poll) {
    return {
      ...base,
      type: 'poll',
      poll: {
        name: poll.name ?? '',
        options: (poll.options ?? []).map((o) => o.optionName ?? ''),
        selectableCount: poll.selectableOptionsCount ?? 0,
      },
    };
  }
  return { ...base, type: 'other' };
}
