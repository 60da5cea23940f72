import { DomainError, errors } from '../../domain/errors.ts';
import type {
  EngineMessage,
  Jid,
  MessageContent,
  OutgoingMessage,
  SentMessage,
} from '../../domain/messages.ts';
import { GROUP_DOMAIN, phoneOfJid, STATUS_BROADCAST, userJid } from '../../domain/messages.ts';
import { extended } from '../../domain/objects.ts';
import { contentOf } from '../../domain/sends.ts';
import type { SandboxInboundInput, SandboxPresenceInput, SandboxReceiptInput } from '../engine.ts';
import { ownJid, type SandboxAccount, type SandboxCredentials } from './account.ts';
import { memberGroup } from './groups.ts';
import { incomingMessageId, outgoingMessageId } from './ids.ts';
import { revealLid, sandboxChatOf } from './lids.ts';
import { isBlocked } from './profile.ts';
import { postStatus, statusReceipt } from './status.ts';

/**
 * Messages on the simulated platform (docs/decisions/0017-messages-and-media.md, docs/decisions/0004-sandbox.md):
 * sends and reactions become `message` events with `isFromMe: true`, awaited so the message row commits before the
 * call returns (docs/decisions/0024-engines-and-data-flow.md); the helpers make other users' messages, receipts and
 * presence arrive.
 */

function isGroupJid(jid: Jid): boolean {
  return jid.endsWith(`@${GROUP_DOMAIN}`);
}

/**
 * Checks that the account can write to `chat`: a group it belongs to, or a registered user.
 * @throws DomainError not_found `group not found`; not_registered `recipient <phone> is not registered on the
 *   platform` (docs/decisions/0001-envelope-and-error-codes.md); invalid when `chat` is neither a user nor a group JID.
 */
export async function checkChat(
  account: SandboxAccount,
  creds: SandboxCredentials,
  chat: Jid,
): Promise<boolean> {
  if (isGroupJid(chat)) {
    await memberGroup(account, ownJid(creds), chat);
    return true;
  }
  const phone = phoneOfJid(chat);
  if (phone === null) throw errors.badRequest(`${chat} is not a user or group JID`);
  const user = await account.world.user(phone);
  if (!user.registered) {
    throw new DomainError('not_registered', `recipient ${phone} is not registered on the platform`);
  }
  return false;
}

async function emitOwn(
  account: SandboxAccount,
  creds: SandboxCredentials,
  chat: Jid,
  isGroup: boolean,
  content: MessageContent,
  id?: string,
): Promise<SentMessage> {
  const messageId = id ?? (await newMessageId(account));
  const message: EngineMessage = {
    id: messageId,
    source: { chat, sender: ownJid(creds), isFromMe: true, isGroup },
    pushName: creds.pushName,
    timestamp: account.context.clock(),
    content,
  };
  await account.context.emit({ type: 'message', message });
  return { id: messageId, timestamp: message.timestamp };
}

/** A new id for a message the account sends (`3EB0…`, ids.ts); no I/O beyond the sequence's block. */
export async function newMessageId(account: SandboxAccount): Promise<string> {
  return outgoingMessageId(account.context.instanceId, await account.sequence.next());
}

/**
 * Sends a message (docs/decisions/0017-messages-and-media.md); a message to `status@broadcast` is a status, shown to
 * its `statusJidList` (status.ts, docs/decisions/0044-status-stories.md). A reply may quote an id never stored, not a
 * message stored in another chat. @throws see {@link checkChat}; invalid `id must name a message in this chat`;
 * not_logged_in before login.
 */
export async function send(account: SandboxAccount, message: OutgoingMessage): Promise<SentMessage> {
  const creds = await account.ready();
  if (message.to === STATUS_BROADCAST) {
    return postStatus(account, creds, message, message.id ?? (await newMessageId(account)));
  }
  const to = await sandboxChatOf(account, message.to);
  const isGroup = await checkChat(account, creds, to);
  if (message.quotedId !== undefined) {
    // As the live engine: a stored message of another chat is not quoted (messages are stored under phone JIDs).
    const quoted = await account.context.findMessage(message.quotedId);
    if (quoted && quoted.source.chat !== to) throw errors.quotedElsewhere();
  }
  const phone = phoneOfJid(to);
  if (!isGroup && phone !== null) await revealLid(account, phone);
  const content = contentOf(message.content, message.quotedId, message.mentions);
  const forwarded =
    message.forwardingScore !== undefined && message.forwardingScore > 0
      ? { forwardingScore: message.forwardingScore }
      : {};
  return emitOwn(account, creds, to, isGroup, extended(content, forwarded), message.id);
}

/**
 * Reacts to `targetId` in `chat` ('' removes the reaction): a `reaction` message of its own, whose id is new;
 * as on the platform, any target id is accepted (docs/decisions/0001-envelope-and-error-codes.md).
 */
export async function react(
  account: SandboxAccount,
  chat: Jid,
  targetId: string,
  emoji: string,
): Promise<SentMessage> {
  const creds = await account.ready();
  const to = await sandboxChatOf(account, chat);
  const isGroup = await checkChat(account, creds, to);
  return emitOwn(account, creds, to, isGroup, { kind: 'reaction', reaction: { emoji, targetId } });
}

/**
 * Sends read receipts for `ids` to their sender (docs/api.md#messages). These are the account's own outgoing
 * receipts, so no event follows (docs/decisions/0018-webhook-events-and-payloads.md `ReadReceipt` reports receipts
 * from others).
 * @throws DomainError invalid when `chat` is a group and `sender` is missing; see {@link checkChat}.
 */
export async function markRead(
  account: SandboxAccount,
  chat: Jid,
  _ids: readonly string[],
  sender?: Jid,
): Promise<void> {
  const creds = await account.ready();
  const isGroup = await checkChat(account, creds, await sandboxChatOf(account, chat));
  if (isGroup && sender === undefined) throw errors.badRequest('senderPhone is required for group chats');
}

/**
 * Helper (docs/decisions/0004-sandbox.md): user `phone` sends text `body` to the account, in `groupJid` when given.
 * A 1:1 message from a user the account blocked is accepted (the answer has its id) but never arrives: no event
 * (docs/decisions/0039-profile-privacy-blocklist.md).
 * @throws DomainError invalid when `phone` is the account itself; not_registered when the sender is not
 *   registered or not in the group; not_found `group not found`; not_logged_in before login.
 */
export async function inbound(account: SandboxAccount, input: SandboxInboundInput): Promise<SentMessage> {
  return arrive(account, input, () => ({ kind: 'text', text: input.body }));
}

/**
 * A message from user `input.phone` arrives (in `input.groupJid` when given) with the content `content` builds
 * for the new message id, once the sender checks passed. Errors as {@link inbound}.
 */
export async function arrive(
  account: SandboxAccount,
  input: Pick<SandboxInboundInput, 'phone' | 'groupJid' | 'pushName'>,
  content: (id: string) => Promise<MessageContent> | MessageContent,
): Promise<SentMessage> {
  const creds = await account.ready();
  if (input.phone === creds.phone) throw errors.badRequest('phone must be another user than this instance');
  const sender = await account.world.user(input.phone);
  if (!sender.registered) {
    throw new DomainError('not_registered', `phone ${input.phone} is not registered on the platform`);
  }
  const senderJid = userJid(input.phone);
  if (input.groupJid !== undefined) {
    const group = await memberGroup(account, ownJid(creds), input.groupJid);
    if (!group.participants.some((p) => p.jid === senderJid)) {
      throw new DomainError('not_participant', `phone ${input.phone} is not a participant of the group`);
    }
  }
  await revealLid(account, input.phone);
  const id = incomingMessageId(account.context.instanceId, await account.sequence.next());
  // A blocked user's 1:1 message is accepted from the sender and never delivered (docs/decisions/0039-profile-privacy-blocklist.md).
  if (input.groupJid === undefined && (await isBlocked(account, creds, input.phone))) {
    return { id, timestamp: account.context.clock() };
  }
  const message: EngineMessage = {
    id,
    source: {
      chat: input.groupJid ?? senderJid,
      sender: senderJid,
      isFromMe: false,
      isGroup: input.groupJid !== undefined,
    },
    pushName: input.pushName ?? sender.pushName,
    timestamp: account.context.clock(),
    content: await content(id),
  };
  await account.context.emit({ type: 'message', message });
  return { id, timestamp: message.timestamp };
}

/**
 * Helper (docs/decisions/0004-sandbox.md): the recipient of sent message `id` acknowledges it. In a group chat the
 * acknowledging member is `phone`, by default the first participant other than the account; for a status, the
 * contact `phone` who views it, by default its first recipient (status.ts).
 * @throws DomainError not_found `message not found` when `id` is not a stored message the account sent;
 *   not_registered when `phone` is not a member of the group; not_participant when a contact did not receive the
 *   status; not_logged_in before login.
 */
export async function receipt(account: SandboxAccount, input: SandboxReceiptInput): Promise<void> {
  const creds = await account.ready();
  const message = await account.context.findMessage(input.id);
  if (!message?.source.isFromMe) throw errors.notFound('message not found');
  if (message.source.chat === STATUS_BROADCAST) return statusReceipt(account, message, input);
  const { chat, isGroup } = message.source;
  let acknowledger: Jid = chat;
  if (isGroup) {
    const group = await memberGroup(account, ownJid(creds), chat);
    const others = group.participants.filter((p) => p.jid !== ownJid(creds)).map((p) => p.jid);
    const wanted = input.phone === undefined ? others[0] : userJid(input.phone);
    if (wanted === undefined || !others.includes(wanted)) {
      throw new DomainError(
        'not_participant',
        `phone ${input.phone ?? ''} is not a participant of the group`,
      );
    }
    acknowledger = wanted;
  } else if (input.phone !== undefined && userJid(input.phone) !== chat) {
    throw new DomainError('not_participant', `phone ${input.phone} is not the recipient of the message`);
  }
  await account.context.emit({
    type: 'receipt',
    state: input.state,
    messageIds: [message.id],
    source: { chat, sender: acknowledger, isFromMe: false, isGroup },
    timestamp: account.context.clock(),
  });
}

/**
 * Helper (docs/decisions/0004-sandbox.md, docs/decisions/0018-webhook-events-and-payloads.md): user `phone` is typing
 * (`composing`), recording audio (`recording` = composing with media `audio`) or stopped (`paused`), in `groupJid`
 * when given.
 * @throws DomainError not_registered when the user is not registered or not in the group; not_found
 *   `group not found`; not_logged_in before login.
 */
export async function presence(account: SandboxAccount, input: SandboxPresenceInput): Promise<void> {
  const creds = await account.ready();
  const user = await account.world.user(input.phone);
  if (!user.registered) {
    throw new DomainError('not_registered', `phone ${input.phone} is not registered on the platform`);
  }
  const sender = userJid(input.phone);
  if (input.groupJid !== undefined) {
    const group = await memberGroup(account, ownJid(creds), input.groupJid);
    if (!group.participants.some((p) => p.jid === sender)) {
      throw new DomainError('not_participant', `phone ${input.phone} is not a participant of the group`);
    }
  } else if (await isBlocked(account, creds, input.phone)) {
    return; // a blocked user's chat state never reaches the account (docs/decisions/0039-profile-privacy-blocklist.md)
  }
  await account.context.emit({
    type: 'presence',
    source: {
      chat: input.groupJid ?? sender,
      sender,
      isFromMe: false,
      isGroup: input.groupJid !== undefined,
    },
    state: input.state === 'paused' ? 'paused' : 'composing',
    media: input.state === 'recording' ? 'audio' : '',
  });
}
