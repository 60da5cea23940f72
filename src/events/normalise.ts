import type {
  EngineEvent,
  EngineMessage,
  MessageContent,
  MessageSource,
  MessageStatusKind,
  MessageUpdate,
  PollVote,
  SessionStatusKind,
} from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import { type CallEvent, callEvent } from './call-event.ts';
import { type GroupUpdateEvent, groupUpdateEvent } from './group-update.ts';
import { type InteractiveReplyBody, interactiveReplyBody } from './interactive-body.ts';

/**
 * Turns domain {@link EngineEvent}s into the webhook payloads of docs/api.md#webhook-events and
 * docs/decisions/0018-webhook-events-and-payloads.md. Pure: no I/O. Timestamps are RFC 3339 UTC with `Z`
 * (docs/decisions/0001-envelope-and-error-codes.md).
 */

/** `event.info` of a message (docs/api.md#webhook-events). */
export interface MessageInfo {
  id: string;
  messageSource: MessageSource;
  pushName: string;
  /** RFC 3339 UTC. */
  timestamp: string;
}

/**
 * `event.message` of a message. `conversation` (docs/api.md#webhook-events) is the text, or the caption of a media
 * message, or the text of an interactive reply's pick, `''` when there is none; the other members follow the
 * platform's message names and appear only for their kind (an interactive reply's: {@link InteractiveReplyBody}).
 * Media bytes are never included.
 */
export interface MessageBody extends InteractiveReplyBody {
  conversation: string;
  imageMessage?: MediaInfo;
  videoMessage?: MediaInfo;
  /** `ptt`: true for a voice note, false for an audio file. */
  audioMessage?: MediaInfo & { ptt: boolean };
  documentMessage?: MediaInfo & { fileName: string };
  stickerMessage?: MediaInfo;
  locationMessage?: { degreesLatitude: number; degreesLongitude: number; name: string; address: string };
  contactMessage?: { displayName: string; vcard: string };
  /** `text` is the emoji (`''` removes the reaction); `key.id` the message reacted to. */
  reactionMessage?: { text: string; key: { id: string } };
  /** A poll: its question, option names and how many a voter may pick (0 = any). */
  pollCreationMessage?: { name: string; options: { optionName: string }[]; selectableOptionsCount: number };
  /**
   * Present when the message replies to another one (`stanzaId`: the quoted message's id), mentions users
   * (`mentionedJid`: their phone JIDs, each written `@<phone>` in the text) or was forwarded (`isForwarded: true`
   * and `forwardingScore`: how many times, docs/decisions/0041-forward-calls-channels.md).
   */
  contextInfo?: { stanzaId?: string; mentionedJid?: string[]; isForwarded?: true; forwardingScore?: number };
}

/** What a media message says about its file: MIME type and size in bytes (0 when unknown). */
export interface MediaInfo {
  mimetype: string;
  fileLength: number;
  caption?: string;
}

/**
 * `event.media` of a media message parley can download: what the file is, and where parley serves its bytes
 * (`GET /v1/messages/{id}/media?from=<instance>` under the public URL).
 */
export interface MediaLink {
  kind: 'image' | 'video' | 'audio' | 'document' | 'sticker';
  /** The MIME type the sender declared. */
  mimetype: string;
  /** Bytes, as the sender declared (0 when unknown). */
  size: number;
  caption?: string;
  /** Documents: the file name the sender gave. */
  fileName?: string;
  url: string;
}

/**
 * `event` of a `Message` webhook (docs/api.md#webhook-events); `media` only on media messages parley can download.
 */
export interface MessageEvent {
  info: MessageInfo;
  message: MessageBody;
  media?: MediaLink;
}

/** Where parley serves the file of message `messageId`: an absolute URL. */
export type MediaUrlOf = (messageId: string) => string;

/** A normalised event without the delivery fields: `type`, the `event` object, and `state` for receipts. */
export type NormalisedEvent =
  | { type: 'Message'; event: MessageEvent }
  | {
      type: 'ReadReceipt';
      state: 'Delivered' | 'Read' | 'Played';
      event: { messageIds: string[]; messageSource: MessageSource; timestamp: string };
    }
  | {
      type: 'ChatPresence';
      event: { messageSource: MessageSource; state: 'composing' | 'paused'; media: '' | 'audio' };
    }
  | { type: 'MessageUpdate'; event: MessageUpdateEvent }
  | { type: 'PollVote'; event: PollVoteEvent }
  | {
      type: 'HistorySync';
      event: {
        syncType: string;
        progress: number;
        chats: { jid: string; name: string; messages: MessageEvent[] }[];
      };
    }
  | { type: 'Call'; event: CallEvent }
  | { type: 'GroupUpdate'; event: GroupUpdateEvent }
  | { type: 'SessionStatus'; event: SessionStatusEvent }
  | { type: 'MessageStatus'; event: MessageStatusEvent };

/**
 * `event` of a `SessionStatus` webhook (docs/api.md "Events"): the new status, why in words when known, when a
 * pause or restriction ends (`until`), and when the change happened (`at`); times RFC 3339 UTC.
 */
export interface SessionStatusEvent {
  status: SessionStatusKind;
  reason?: string;
  /** RFC 3339 UTC. */
  until?: string;
  /** RFC 3339 UTC. */
  at: string;
}

/**
 * `event` of a `MessageStatus` webhook (docs/api.md "Events"): the message id a send answered, its final outcome,
 * the error for `failed`, and when (`at`, RFC 3339 UTC).
 */
export interface MessageStatusEvent {
  id: string;
  status: MessageStatusKind;
  error?: string;
  /** RFC 3339 UTC. */
  at: string;
}

/**
 * `event` of a `MessageUpdate` webhook (docs/decisions/0026-chats-edits-polls-and-calls.md): `kind` edit or delete,
 * the changed message's id, where it is and who changed it (phone JIDs), the new text for an edit, and when.
 */
export interface MessageUpdateEvent {
  kind: 'edit' | 'delete';
  messageId: string;
  messageSource: MessageSource;
  /** Edits only: the new text. */
  text?: string;
  /** RFC 3339 UTC. */
  timestamp: string;
  /**
   * A deletion in a group of another member's message whose sender parley could not verify as a group admin: the
   * stored message was kept (docs/decisions/0106-unverified-group-deletions.md). Absent otherwise.
   */
  unverified?: true;
}

/**
 * `event` of a `PollVote` webhook (docs/decisions/0026-chats-edits-polls-and-calls.md): the poll's id and question,
 * the voter (`messageSource.sender`) and the option names the voter now selects (decrypted; `[]` withdraws the vote).
 */
export interface PollVoteEvent {
  pollId: string;
  pollName: string;
  messageSource: MessageSource;
  selectedOptions: string[];
  /** RFC 3339 UTC. */
  timestamp: string;
}

const iso = (ms: number): string => new Date(ms).toISOString();

function updateEvent(update: MessageUpdate): MessageUpdateEvent {
  return {
    kind: update.kind,
    messageId: update.messageId,
    messageSource: { ...update.source },
    ...(update.kind === 'edit' ? { text: update.text ?? '' } : {}),
    timestamp: iso(update.timestamp),
    ...(update.unverified === true ? { unverified: true as const } : {}),
  };
}

function voteEvent(vote: PollVote): PollVoteEvent {
  return {
    pollId: vote.pollId,
    pollName: vote.pollName,
    messageSource: { ...vote.source },
    selectedOptions: [...vote.selectedOptions],
    timestamp: iso(vote.timestamp),
  };
}

function media(content: MessageContent): MediaInfo {
  return {
    mimetype: content.mimetype ?? 'application/octet-stream',
    fileLength: content.fileLength ?? 0,
    ...(content.text === undefined ? {} : { caption: content.text }),
  };
}

/** The `event.message` object of `content` (see {@link MessageBody}). */
export function messageBody(content: MessageContent): MessageBody {
  const body: MessageBody = { conversation: content.text ?? '' };
  switch (content.kind) {
    case 'image':
      body.imageMessage = media(content);
      break;
    case 'video':
      body.videoMessage = media(content);
      break;
    case 'audio':
      body.audioMessage = extended(media(content), { ptt: content.ptt ?? true });
      break;
    case 'document':
      body.documentMessage = extended(media(content), { fileName: content.fileName ?? 'file' });
      break;
    case 'sticker':
      body.stickerMessage = media(content);
      break;
    case 'location':
      body.locationMessage = {
        degreesLatitude: content.latitude ?? 0,
        degreesLongitude: content.longitude ?? 0,
        name: content.name ?? '',
        address: content.address ?? '',
      };
      break;
    case 'contact':
      body.contactMessage = { displayName: content.name ?? '', vcard: content.vcard ?? '' };
      break;
    case 'reaction':
      if (content.reaction) {
        body.reactionMessage = { text: content.reaction.emoji, key: { id: content.reaction.targetId } };
      }
      break;
    case 'poll':
      body.pollCreationMessage = {
        name: content.text ?? '',
        options: (content.poll?.options ?? []).map((optionName) => ({ optionName })),
        selectableOptionsCount: content.poll?.selectableCount ?? 0,
      };
      break;
    case 'interactive_reply':
      if (content.interactive)
        Object.assign(body, interactiveReplyBody(content.interactive, content.text ?? ''));
      break;
    default:
      break;
  }
  const forwarded = content.forwardingScore !== undefined && content.forwardingScore > 0;
  if (content.quotedId !== undefined || (content.mentions?.length ?? 0) > 0 || forwarded) {
    const context: NonNullable<MessageBody['contextInfo']> = {};
    if (content.quotedId !== undefined) context.stanzaId = content.quotedId;
    if (content.mentions?.length) context.mentionedJid = [...content.mentions];
    if (forwarded) {
      context.isForwarded = true;
      context.forwardingScore = content.forwardingScore;
    }
    body.contextInfo = context;
  }
  return body;
}

/** The `event.media` of a message: present for a media kind with a download reference and a URL maker. */
export function mediaLink(message: EngineMessage, mediaUrl: MediaUrlOf | undefined): MediaLink | undefined {
  const { content } = message;
  if (mediaUrl === undefined || content.download === undefined) return undefined;
  const kind = content.kind;
  if (kind !== 'image' && kind !== 'video' && kind !== 'audio' && kind !== 'document' && kind !== 'sticker')
    return undefined;
  return {
    kind,
    mimetype: content.mimetype ?? 'application/octet-stream',
    size: content.fileLength ?? 0,
    ...(content.text === undefined ? {} : { caption: content.text }),
    ...(content.fileName === undefined ? {} : { fileName: content.fileName }),
    url: mediaUrl(message.id),
  };
}

/**
 * The `event` of a `Message` webhook for `message` (docs/api.md#webhook-events), with `media` when `mediaUrl` is
 * given and parley can download the message's file.
 */
export function messageEvent(message: EngineMessage, mediaUrl?: MediaUrlOf): MessageEvent {
  const link = mediaLink(message, mediaUrl);
  return {
    info: {
      id: message.id,
      messageSource: { ...message.source },
      pushName: message.pushName,
      timestamp: iso(message.timestamp),
    },
    message: messageBody(message.content),
    ...(link === undefined ? {} : { media: link }),
  };
}

const RECEIPT_STATES = { delivered: 'Delivered', read: 'Read', played: 'Played' } as const;

/**
 * Normalises one engine event into its webhook type and payload (docs/api.md#webhook-events,
 * docs/decisions/0018-webhook-events-and-payloads.md); null for events that are not webhook events (`connection`,
 * `contacts`, `read`, and a `receipt` of the account's own devices; a connection change reaches webhooks as the
 * `sessionStatus` event derived from it, src/events/session-status.ts). `mediaUrl` gives downloadable media messages
 * their `event.media` link.
 */
export function normaliseEvent(event: EngineEvent, mediaUrl?: MediaUrlOf): NormalisedEvent | null {
  switch (event.type) {
    case 'message':
      return { type: 'Message', event: messageEvent(event.message, mediaUrl) };
    case 'receipt':
      // The account's own devices reading or playing what others sent (the phone's `read-self`) move the stored
      // messages only: `ReadReceipt` reports the receipts of others
      // (docs/decisions/0018-webhook-events-and-payloads.md).
      if (event.source.isFromMe) return null;
      return {
        type: 'ReadReceipt',
        state: RECEIPT_STATES[event.state],
        event: {
          messageIds: [...event.messageIds],
          messageSource: { ...event.source },
          timestamp: iso(event.timestamp),
        },
      };
    case 'presence':
      return {
        type: 'ChatPresence',
        event: { messageSource: { ...event.source }, state: event.state, media: event.media },
      };
    case 'history':
      return {
        type: 'HistorySync',
        event: {
          syncType: event.syncType,
          progress: event.progress,
          chats: event.chats.map((chat) => ({
            jid: chat.jid,
            name: chat.name,
            messages: chat.messages.map((message) => messageEvent(message, mediaUrl)),
          })),
        },
      };
    case 'call':
      return { type: 'Call', event: callEvent(event.call) };
    case 'group':
      return { type: 'GroupUpdate', event: groupUpdateEvent(event.update) };
    case 'messageUpdate':
      return { type: 'MessageUpdate', event: updateEvent(event.update) };
    case 'pollVote':
      return { type: 'PollVote', event: voteEvent(event.vote) };
    case 'sessionStatus':
      return {
        type: 'SessionStatus',
        event: {
          status: event.status,
          ...(event.reason === undefined ? {} : { reason: event.reason }),
          ...(event.until === undefined ? {} : { until: iso(event.until) }),
          at: iso(event.at),
        },
      };
    case 'messageStatus':
      return {
        type: 'MessageStatus',
        event: {
          id: event.id,
          status: event.status,
          ...(event.error === undefined ? {} : { error: event.error }),
          at: iso(event.at),
        },
      };
    default:
      return null;
  }
}

/**
 * The exact body text of a webhook POST (docs/decisions/0018-webhook-events-and-payloads.md):
 * `{ type, [state], event, instanceId, sequence }` in that key order. This text is stored once and sent byte for byte
 * on every attempt, so signatures stay verifiable.
 * @param sequence the per-instance event number (≥ 1).
 */
export function webhookBody(normalised: NormalisedEvent, instanceId: string, sequence: number): string {
  return JSON.stringify(extended(normalised, { instanceId, sequence }));
}
