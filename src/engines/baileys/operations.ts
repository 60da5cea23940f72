import {
  type BinaryNode,
  generateMessageIDV2,
  isJidGroup,
  type proto,
  type ReachoutTimelockState,
  type WAMessage,
  type WAMessageKey,
} from 'baileys';
import { DomainError, errors } from '../../domain/errors.ts';
import type { EngineEvent, EngineMessage, Jid, OutgoingMessage, SentMessage } from '../../domain/messages.ts';
import { STATUS_BROADCAST } from '../../domain/messages.ts';
import { type EngineSessionContext, UnrecordedSendError } from '../engine.ts';
import { waitForAck } from './ack-wait.ts';
import { relayAddress } from './addressing.ts';
import type { BoundedCache } from './cache.ts';
import { mapPlatformErrors, platformFailure, platformRateLimited, reachoutLocked } from './errors.ts';
import { type FlaggedSource, type MappingContext, timestampMs, toMessageContent } from './incoming.ts';
import { isLidLike } from './jid.ts';
import { buildOutgoingMessage, buildReaction, type LinkPreviewFetcher } from './outgoing.ts';
import { loadPollSecret, POLL_CREATION_META, savePollSecret } from './polls.ts';
import type { BaileysLogger, SocketLike } from './socket.ts';

/** What the operations share with the session. */
export interface OperationDeps {
  context: EngineSessionContext;
  mapping: MappingContext;
  /** Group metadata cache (also Baileys' `cachedGroupMetadata`). */
  groups: BoundedCache;
  /** Recently sent platform messages by id (Baileys' `getMessage` answers retries from here first). */
  recent: BoundedCache;
  /**
   * How long a relay waits for the server's ack once the stanza is written, ms (a 463/429 nack arrives there); past
   * it the connection is dropped as lost and the relay raises `UnconfirmedRelayError` (engine.ts, ack-wait.ts).
   */
  ackTimeoutMs: number;
  linkPreview?: LinkPreviewFetcher;
  baileysLogger: BaileysLogger;
  /** The platform's last reach-out timelock report. */
  reachout(): ReachoutTimelockState | undefined;
  /**
   * Records an event of a call path through `context.emit` (bounded retry on the session side,
   * docs/decisions/0024-engines-and-data-flow.md).
   * @throws the recording error once retrying gave up.
   */
  record(event: EngineEvent): Promise<void>;
  /** Subscribes to a user's presence once in a while (chat presence needs it). */
  subscribePresence(sock: SocketLike, jid: Jid): void;
}

function ownJid(sock: SocketLike): string {
  const id = sock.user?.id;
  if (!id) throw errors.notLoggedIn();
  return id;
}

/**
 * Maps a nack (`<ack error="…">`, Baileys' `handleBadAck`) to its own error (docs/decisions/0025-live-engine.md): 463
 * reach-out timelock (with the platform's end time when it reports one), 429 rate-overlimit, anything else 502 with
 * the code.
 */
async function checkAck(node: BinaryNode, sock: SocketLike, deps: OperationDeps): Promise<void> {
  const code = node.attrs.error;
  if (!code) return;
  const now = deps.context.clock();
  if (code === '463') {
    let lock = deps.reachout();
    if (!lock?.timeEnforcementEnds) {
      lock = await Promise.race([
        sock.fetchAccountReachoutTimelock().catch(() => undefined),
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 2_000).unref()),
      ]);
    }
    throw reachoutLocked(lock?.timeEnforcementEnds, now);
  }
  if (code === '429') throw platformRateLimited();
  const known = NACK_TEXT[code];
  throw new DomainError(
    'platform_refused',
    `the platform rejected the message (error ${code}${known ? `: ${known}` : ''})`,
  );
}

/** What the platform's nack codes mean, where Baileys names them (Utils/decode-wa-message.js SERVER_ERROR_CODES). */
const NACK_TEXT: Record<string, string> = {
  '479': 'invalid stanza, smax-invalid',
};

/**
 * Options of {@link relayAndRecord}: stanza attributes and child nodes Baileys' `sendMessage` adds for some
 * contents (`edit="1"` for an edit, `edit="7"` for a revoke, `<meta polltype="creation"/>` for a poll), and the
 * event to record instead of the `message` event (edits and revokes record a `messageUpdate`).
 */
export interface RelayOptions {
  additionalAttributes?: Record<string, string>;
  additionalNodes?: BinaryNode[];
  /**
   * A status's audience (user JIDs): Baileys relays a message to `status@broadcast` to their devices
   * (Socket/messages-send.js relayMessage `statusJidList`; docs/decisions/0044-status-stories.md).
   */
  statusJidList?: Jid[];
  recordAs?: (source: FlaggedSource, timestamp: number) => EngineEvent;
  /**
   * A send's relay (`sendMessage`): a recording that fails after the message went out raises
   * {@link UnrecordedSendError}, so the send queue ends the job sent. Other calls (reactions, edits, deletes) raise
   * the recording's own error, answered as any store error (503 for a store that cannot be reached).
   */
  unrecordedError?: boolean;
}

/**
 * Relays a built message (a 1:1 message to the user's LID when Baileys knows it, addressing.ts) and confirms it:
 * waits for the server's ack (bounded), turns a nack into its error, remembers the message for retries, and
 * records it as a `message` event with bounded retry (`deps.record`); the recorded chat stays the phone JID.
 * @throws UnconfirmedRelayError (504 `timeout`) when the platform did not acknowledge the message within
 *   `deps.ackTimeoutMs` ms after the relay (the socket is then dropped as lost) or the socket closed first: the
 *   message may or may not have reached the platform, and nothing is recorded;
 *   when the message could not be recorded even after retrying (docs/decisions/0024-engines-and-data-flow.md):
 *   UnrecordedSendError (its `cause` the recording's error) with `options.unrecordedError`, else the recording's
 *   error; the message did reach the platform, which the error log line says with the message id.
 */
export async function relayAndRecord(
  sock: SocketLike,
  to: Jid,
  msg: WAMessage,
  deps: OperationDeps,
  options: RelayOptions = {},
): Promise<SentMessage> {
  const id = msg.key.id ?? '';
  const content = msg.message;
  if (!content) throw new Error('built message has no content');
  const address = await relayAddress(sock, to, (error) =>
    deps.context.logger.debug({ err: error, to }, 'LID lookup failed; relaying to the phone JID'),
  );
  const ack = waitForAck(sock, id, deps.context.logger);
  try {
    const extra = {
      ...(options.additionalAttributes ? { additionalAttributes: options.additionalAttributes } : {}),
      ...(options.additionalNodes ? { additionalNodes: options.additionalNodes } : {}),
      ...(options.statusJidList ? { statusJidList: options.statusJidList } : {}),
    };
    await mapPlatformErrors(() => sock.relayMessage(address, content, { messageId: id, ...extra }), {
      now: deps.context.clock(),
    });
  } catch (error) {
    ack.cancel();
    throw error;
  }
  ack.arm(deps.ackTimeoutMs);
  await checkAck(await ack.done, sock, deps);
  deps.recent.set(id, content);
  const me = deps.mapping.me();
  const timestamp = timestampMs(msg.messageTimestamp, deps.context.clock());
  // A send addressed to a LID is recorded under the phone JID when a mapping knows it
  // (docs/decisions/0038-lid-mappings.md), as received messages are; else under the LID, flagged.
  const chat = isLidLike(to) ? await deps.mapping.resolver.resolve(to) : { jid: to, resolved: true };
  const source: FlaggedSource = {
    chat: chat.jid,
    sender: me.phoneJid ?? '',
    isFromMe: true,
    isGroup: Boolean(isJidGroup(to)),
  };
  if (!chat.resolved) source.lidUnresolved = true;
  const message: EngineMessage = {
    id,
    source,
    pushName: me.pushName,
    timestamp,
    content: toMessageContent(content) ?? { kind: 'other' },
  };
  try {
    await deps.record(options.recordAs ? options.recordAs(source, timestamp) : { type: 'message', message });
  } catch (error) {
    deps.context.logger.error(
      { err: error, event: 'message', id, chat: to },
      'a message was relayed to the platform but recording it failed after retrying',
    );
    throw options.unrecordedError ? new UnrecordedSendError({ id, timestamp }, error) : error;
  }
  return { id, timestamp };
}

/**
 * A new platform message id for a send (Baileys' `generateMessageIDV2` over the account's phone JID), made before
 * the relay (docs/decisions/0009-sends-as-jobs.md); works while the socket is down.
 * @throws DomainError not_logged_in when the account was never linked.
 */
export function newMessageId(deps: OperationDeps): string {
  const me = deps.mapping.me().phoneJid;
  if (!me) throw errors.notLoggedIn();
  return generateMessageIDV2(me);
}

/**
 * Baileys' media upload, whose failure on every media host is answered as the platform unreachable (503): Baileys
 * (Utils/messages-media.js `getWAUploadToServer`) turns any failure there (connection refused or reset, timeout,
 * TLS, a host's 5xx) into one `Boom('Media upload failed on all hosts', 500)` without the cause, so nothing says the
 * platform refused the file, and a queued send must be tried again (docs/decisions/0009-sends-as-jobs.md). Other
 * failures (the `media_conn` query's answer) are left to {@link mapPlatformErrors}.
 */
function uploadOrUnreachable(upload: SocketLike['waUploadToServer']): SocketLike['waUploadToServer'] {
  return async (...args) => {
    try {
      return await upload(...args);
    } catch (error) {
      const failure = platformFailure(error);
      if (failure?.origin !== 'transport' || failure.code !== 500) throw error;
      throw new DomainError(
        'platform_unreachable',
        `the platform's media hosts could not be reached (${error instanceof Error ? error.message : String(error)})`,
        { cause: error },
      );
    }
  };
}

/**
 * Sends one message (docs/decisions/0017-messages-and-media.md) through `generateWAMessage` + `relayMessage`;
 * resolves once it is recorded.
 * @throws UnrecordedSendError when recording still fails after the retry (the message was relayed).
 */
export async function sendMessage(
  sock: SocketLike,
  deps: OperationDeps,
  message: OutgoingMessage,
): Promise<SentMessage> {
  const userJid = ownJid(sock);
  const msg = await mapPlatformErrors(() =>
    buildOutgoingMessage(message.to, message, {
      upload: uploadOrUnreachable(sock.waUploadToServer),
      userJid,
      messageId: message.id ?? generateMessageIDV2(userJid),
      findMessage: (id) => deps.context.findMessage(id),
      storedChatOf: async (jid) => (isLidLike(jid) ? (await deps.mapping.resolver.resolve(jid)).jid : jid),
      logger: deps.baileysLogger,
      ...(deps.linkPreview ? { linkPreview: deps.linkPreview } : {}),
    }),
  );
  if (message.to === STATUS_BROADCAST) {
    // A status: the message to status@broadcast goes to its audience's devices, encrypted with the account's
    // sender key for status@broadcast (Baileys relayMessage, `isStatus`; docs/decisions/0044-status-stories.md).
    return relayAndRecord(sock, message.to, msg, deps, {
      statusJidList: [...(message.statusJidList ?? [])],
      unrecordedError: true,
    });
  }
  if (!isJidGroup(message.to)) deps.subscribePresence(sock, message.to);
  if (message.content.kind === 'poll') {
    const context = msg.message?.messageContextInfo;
    if (!context?.messageSecret) throw new Error('built poll has no messageSecret');
    // A job relayed again under its id (after a crash, docs/decisions/0009-sends-as-jobs.md) keeps the secret of
    // its first relay: the recipient shows the first copy, and encrypts its votes with that copy's secret.
    const earlier = await loadPollSecret(deps.context.auth, msg.key.id ?? '');
    if (earlier) context.messageSecret = earlier.secret;
    else {
      await savePollSecret(deps.context.auth, msg.key.id ?? '', {
        secret: Buffer.from(context.messageSecret),
        name: message.content.name,
        options: message.content.options,
      });
    }
    return relayAndRecord(sock, message.to, msg, deps, {
      additionalNodes: [POLL_CREATION_META],
      unrecordedError: true,
    });
  }
  return relayAndRecord(sock, message.to, msg, deps, { unrecordedError: true });
}

/**
 * Reacts to a message (docs/api.md#messages); returns the target's id (docs/decisions/0017-messages-and-media.md).
 */
export async function sendReaction(
  sock: SocketLike,
  deps: OperationDeps,
  input: { chat: Jid; targetId: string; fromMe: boolean; emoji: string; sender?: Jid },
): Promise<SentMessage> {
  const userJid = ownJid(sock);
  let participant = input.sender;
  if (!participant && !input.fromMe && isJidGroup(input.chat)) {
    participant = (await deps.context.findMessage(input.targetId))?.source.sender;
  }
  const msg = await buildReaction(
    input.chat,
    { id: input.targetId, fromMe: input.fromMe, ...(participant ? { participant } : {}) },
    input.emoji,
    {
      upload: sock.waUploadToServer,
      userJid,
      messageId: generateMessageIDV2(userJid),
      logger: deps.baileysLogger,
    },
  );
  const sent = await relayAndRecord(sock, input.chat, msg, deps);
  return { id: input.targetId, timestamp: sent.timestamp };
}

/**
 * Sends read receipts (docs/api.md#messages): group receipts name the sender (`participant`); when the caller gave
 * none, the stored message's sender is used. @throws invalid when a group message's sender is unknown.
 */
export async function markRead(
  sock: SocketLike,
  deps: OperationDeps,
  chat: Jid,
  ids: readonly string[],
  sender?: Jid,
): Promise<void> {
  const isGroup = Boolean(isJidGroup(chat));
  const keys: WAMessageKey[] = [];
  for (const id of ids) {
    let participant = sender;
    if (isGroup && !participant) participant = (await deps.context.findMessage(id))?.source.sender;
    if (isGroup && !participant) throw errors.badRequest('senderPhone is required for group chats');
    keys.push({ remoteJid: chat, id, fromMe: false, ...(isGroup && participant ? { participant } : {}) });
  }
  await mapPlatformErrors(() => sock.readMessages(keys), { now: deps.context.clock() });
}

/** Type of what Baileys' `getMessage` returns. */
export type StoredProto = proto.IMessage | undefined;
