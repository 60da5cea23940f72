import {
  generateMessageIDV2,
  generateWAMessage,
  isJidGroup,
  jidNormalizedUser,
  normalizeMessageContent,
  proto,
  type WAMessage,
} from 'baileys';
import { errors } from '../../domain/errors.ts';
import type { ChatPresenceState, EngineEvent, Jid, SentMessage } from '../../domain/messages.ts';
import { extended } from '../../domain/objects.ts';
import { mapPlatformErrors } from './errors.ts';
import { type MappingContext, sourceOfKey, timestampMs } from './incoming.ts';
import { type OperationDeps, relayAndRecord } from './operations.ts';
import { decryptVote, loadPollSecret } from './polls.ts';
import type { SocketLike } from './socket.ts';

/**
 * Edits, deletions for everyone, chat presence and incoming edits, revokes and poll votes on the live engine
 * (docs/decisions/0026-chats-edits-polls-and-calls.md), the way Baileys' `sendMessage` builds them
 * (Socket/messages-send.js: `edit` → a `protocolMessage` MESSAGE_EDIT relayed with `edit="1"`, `delete` → REVOKE with
 * `edit="7"`) and `sendPresenceUpdate` sends them.
 */

function ownJid(sock: SocketLike): string {
  const id = sock.user?.id;
  if (!id) throw errors.notLoggedIn();
  return id;
}

async function relayUpdate(
  sock: SocketLike,
  deps: OperationDeps,
  chat: Jid,
  id: string,
  content: { text: string; edit: proto.IMessageKey } | { delete: proto.IMessageKey },
): Promise<SentMessage> {
  const userJid = ownJid(sock);
  const msg = await generateWAMessage(chat, content, {
    upload: sock.waUploadToServer,
    userJid,
    messageId: generateMessageIDV2(userJid),
    logger: deps.baileysLogger,
  });
  const isEdit = 'edit' in content;
  const sent = await relayAndRecord(sock, chat, msg, deps, {
    additionalAttributes: { edit: isEdit ? '1' : '7' },
    recordAs: (source, timestamp): EngineEvent => ({
      type: 'messageUpdate',
      update: isEdit
        ? { kind: 'edit', messageId: id, source, text: content.text, timestamp }
        : { kind: 'delete', messageId: id, source, timestamp },
    }),
  });
  return { id, timestamp: sent.timestamp };
}

/** Edits the account's text message `id` in `chat` to `text`; records a `messageUpdate` (edit). */
export function editMessage(
  sock: SocketLike,
  deps: OperationDeps,
  chat: Jid,
  id: string,
  text: string,
): Promise<SentMessage> {
  return relayUpdate(sock, deps, chat, id, { text, edit: { remoteJid: chat, fromMe: true, id } });
}

/** Deletes the account's message `id` in `chat` for everyone; records a `messageUpdate` (delete). */
export function revokeMessage(
  sock: SocketLike,
  deps: OperationDeps,
  chat: Jid,
  id: string,
): Promise<SentMessage> {
  return relayUpdate(sock, deps, chat, id, { delete: { remoteJid: chat, fromMe: true, id } });
}

/**
 * Shows `state` in `chat` (`<chatstate>`: composing, recording = composing media audio, paused) or the
 * account's availability (`<presence type>`), through Baileys' `sendPresenceUpdate`.
 */
export async function sendChatPresence(
  sock: SocketLike,
  deps: OperationDeps,
  chat: Jid,
  state: ChatPresenceState,
): Promise<void> {
  await mapPlatformErrors(() => sock.sendPresenceUpdate(state, chat), { now: deps.context.clock() });
}

/** The new text of an edited message (`editedMessage`): text, extended text or a caption. */
function editedText(message: proto.IMessage | null | undefined): string {
  const inner = normalizeMessageContent(message);
  return (
    inner?.conversation ??
    inner?.extendedTextMessage?.text ??
    inner?.imageMessage?.caption ??
    inner?.videoMessage?.caption ??
    inner?.documentMessage?.caption ??
    ''
  );
}

/**
 * The `messageUpdate` or `pollVote` event a received platform message stands for, if any: a `protocolMessage`
 * REVOKE or MESSAGE_EDIT (an edit or deletion by its sender — someone else, or the account on another device),
 * or a `pollUpdateMessage` on one of the account's polls, decrypted with the poll's stored secret (the voter tried
 * as each JID of the key, and as the account's phone JID and LID for an own vote cast on another device). Null for
 * every other message; `'undecryptable'` for a vote on a poll whose secret is unknown (sent before a logout, or by
 * another client) or that no candidate JID pair decrypts (the caller logs and drops it). The event carries the
 * platform message's id (`platformId`), so a copy the platform hands over again is recorded once.
 * @throws the auth store's error reading the poll's secret: the port tries the read as a recording is tried (an
 *   unreachable store without limit, an unknown error five times, docs/decisions/0011-store-faults.md), so what it
 *   raises is a permanent error, one tried out, or the shutdown's.
 */
export async function updateEventOf(
  msg: WAMessage,
  ctx: MappingContext,
  deps: { auth: OperationDeps['context']['auth']; now: number },
): Promise<EngineEvent | null | 'undecryptable'> {
  const content = normalizeMessageContent(msg.message);
  if (!content) return null;
  // The platform message's own id: a repeat of it is left out where it is recorded (src/events/message-copies.ts).
  const carrier = msg.key.id ? { platformId: msg.key.id } : {};
  const protocol = content.protocolMessage;
  const Type = proto.Message.ProtocolMessage.Type;
  if (protocol?.key?.id && (protocol.type === Type.REVOKE || protocol.type === Type.MESSAGE_EDIT)) {
    const source = await sourceOfKey(msg.key, ctx);
    const timestamp =
      protocol.timestampMs !== null && protocol.timestampMs !== undefined
        ? Number(protocol.timestampMs)
        : timestampMs(msg.messageTimestamp, deps.now);
    if (protocol.type === Type.REVOKE) {
      return {
        type: 'messageUpdate',
        update: { kind: 'delete', messageId: protocol.key.id, source, timestamp },
        ...carrier,
      };
    }
    return {
      type: 'messageUpdate',
      ...carrier,
      update: {
        kind: 'edit',
        messageId: protocol.key.id,
        source,
        text: editedText(protocol.editedMessage),
        timestamp,
      },
    };
  }
  const update = content.pollUpdateMessage;
  const pollId = update?.pollCreationMessageKey?.id;
  if (!update || !pollId || !update.vote) return null;
  const poll = await loadPollSecret(deps.auth, pollId);
  if (!poll) return 'undecryptable';
  const me = ctx.me();
  const creators = [me.phoneJid, me.lid].filter((jid): jid is string => Boolean(jid));
  const key = msg.key;
  // A vote the account cast on another device (its phone) comes as an own message whose key names the chat's
  // other user only: it was encrypted over the account's own JID, phone or LID.
  const own = key.fromMe ? creators : [];
  const voters = [key.participantAlt, key.remoteJidAlt, key.participant, key.remoteJid, ...own]
    .filter((jid): jid is string => Boolean(jid))
    .map((jid) => jidNormalizedUser(jid));
  const selected = decryptVote(update.vote, extended(poll, { id: pollId }), creators, [...new Set(voters)]);
  if (!selected) return 'undecryptable';
  const source = await sourceOfKey(key, ctx);
  const timestamp =
    update.senderTimestampMs !== null && update.senderTimestampMs !== undefined
      ? Number(update.senderTimestampMs)
      : timestampMs(msg.messageTimestamp, deps.now);
  return {
    type: 'pollVote',
    ...carrier,
    vote: {
      pollId,
      pollName: poll.name,
      source: extended(source, { isGroup: Boolean(isJidGroup(key.remoteJid ?? '')) }),
      selectedOptions: selected,
      timestamp,
    },
  };
}
