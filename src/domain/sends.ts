import type { Jid, MessageContent, OutgoingContent } from './messages.ts';

/**
 * Sends as jobs (docs/decisions/0009-sends-as-jobs.md): what a message-creating send is while it waits, and how its
 * content is stored. Shared by the application layer, the send queue and the engines.
 */

/**
 * A send job's status: `pending` (accepted, waiting for its turn, its `sendAt`, the pace or the session),
 * `sending` (claimed by a node and being relayed), `sent` (the platform acknowledged it), `failed` (the platform
 * refused it or it could not be relayed; `error` says why), `canceled` (canceled before its relay).
 */
export type SendJobStatus = 'pending' | 'sending' | 'sent' | 'failed' | 'canceled';

/** How the request that created a job waits: `sync` answers after the relay, `async` answered 202 Queued. */
export type SendMode = 'sync' | 'async';

/**
 * An instance's send pace (docs/decisions/0013-pacing.md): at least `minIntervalMs` (ms) between two relays plus a
 * random `0..jitterMs` (ms), and at most `newChatsPerDay` relays that open a chat per rolling 24 h (null: no cap).
 * All zero / null is off.
 */
export interface PacingSettings {
  minIntervalMs: number;
  jitterMs: number;
  newChatsPerDay: number | null;
}

/** The queue of an instance is paused by a platform restriction signal until `until` (epoch ms). */
export interface SendPause {
  reason: string;
  until: number;
}

/**
 * The stored/normalised content of an outgoing message: no media bytes, sizes in bytes
 * (docs/decisions/0017-messages-and-media.md). It is what the live engine stores for the same send, read back from
 * the platform message it built (src/engines/baileys/incoming.ts `toMessageContent`), so a sandbox instance and a live
 * one keep the same content: an empty caption, location name or address and contact name are left out (the platform
 * message carries none), an empty document file name is `file` (Baileys' default), and an audio's `ptt` is always
 * set (true unless the send said false: a voice note).
 */
export function contentOf(
  content: OutgoingContent,
  quotedId?: string,
  mentions?: readonly Jid[],
): MessageContent {
  const quoted = {
    ...(quotedId === undefined ? {} : { quotedId }),
    ...(mentions === undefined || mentions.length === 0 ? {} : { mentions: [...mentions] }),
  };
  const caption = (text: string | undefined) => (text ? { text } : {});
  switch (content.kind) {
    case 'text':
      return { kind: 'text', text: content.text, ...quoted };
    case 'image':
    case 'video':
      return { kind: content.kind, ...media(content.media), ...caption(content.caption), ...quoted };
    case 'document':
      return {
        kind: 'document',
        ...media(content.media),
        fileName: content.fileName || 'file',
        ...caption(content.caption),
        ...quoted,
      };
    case 'audio':
      return { kind: 'audio', ...media(content.media), ptt: content.ptt !== false, ...quoted };
    case 'sticker':
      return { kind: content.kind, ...media(content.media), ...quoted };
    case 'location':
      return {
        kind: 'location',
        latitude: content.latitude,
        longitude: content.longitude,
        ...(content.name ? { name: content.name } : {}),
        ...(content.address ? { address: content.address } : {}),
        ...quoted,
      };
    case 'contact':
      return {
        kind: 'contact',
        ...(content.displayName ? { name: content.displayName } : {}),
        ...(content.vcard ? { vcard: content.vcard } : {}),
        ...quoted,
      };
    case 'poll':
      return {
        kind: 'poll',
        text: content.name,
        poll: { options: [...content.options], selectableCount: content.selectableCount },
        ...quoted,
      };
  }
}

function media(payload: { data: Buffer; mimetype: string }): Pick<MessageContent, 'mimetype' | 'fileLength'> {
  return { mimetype: payload.mimetype, fileLength: payload.data.length };
}
