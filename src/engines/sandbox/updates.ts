import { DomainError, errors } from '../../domain/errors.ts';
import type { ChatPresenceState, Jid, MessageSource, SentMessage } from '../../domain/messages.ts';
import { userJid } from '../../domain/messages.ts';
import type { SandboxUpdateInput, SandboxVoteInput } from '../engine.ts';
import { ownJid, type SandboxAccount } from './account.ts';
import { memberGroup } from './groups.ts';
import { sandboxChatOf } from './lids.ts';
import { checkChat } from './messaging.ts';

/**
 * Edits, deletions for everyone, chat presence and poll votes on the simulated platform
 * (docs/decisions/0026-chats-edits-polls-and-calls.md). The account's own edits and deletions become `messageUpdate`
 * events with `isFromMe: true`, awaited so the stored message changes before the call returns
 * (docs/decisions/0024-engines-and-data-flow.md); the helpers let a simulated user edit, delete and vote.
 */

/**
 * The account edits its message `id` in `chat` (the application service checked ownership, kind and window).
 * @throws see {@link checkChat}; not_logged_in before login.
 */
export async function edit(
  account: SandboxAccount,
  chat: Jid,
  id: string,
  text: string,
): Promise<SentMessage> {
  const creds = await account.ready();
  const to = await sandboxChatOf(account, chat);
  const isGroup = await checkChat(account, creds, to);
  const timestamp = account.context.clock();
  const source: MessageSource = { chat: to, sender: ownJid(creds), isFromMe: true, isGroup };
  await account.context.emit({
    type: 'messageUpdate',
    update: { kind: 'edit', messageId: id, source, text, timestamp },
  });
  return { id, timestamp };
}

/** The account deletes its message `id` in `chat` for everyone. @throws see {@link checkChat}. */
export async function revoke(account: SandboxAccount, chat: Jid, id: string): Promise<SentMessage> {
  const creds = await account.ready();
  const to = await sandboxChatOf(account, chat);
  const isGroup = await checkChat(account, creds, to);
  const timestamp = account.context.clock();
  const source: MessageSource = { chat: to, sender: ownJid(creds), isFromMe: true, isGroup };
  await account.context.emit({
    type: 'messageUpdate',
    update: { kind: 'delete', messageId: id, source, timestamp },
  });
  return { id, timestamp };
}

/**
 * The account shows `state` in `chat`. The simulated users have no screen, so nothing else happens; the chat is
 * checked as for a send. @throws see {@link checkChat}; not_logged_in before login.
 */
export async function sendPresence(
  account: SandboxAccount,
  chat: Jid,
  _state: ChatPresenceState,
): Promise<void> {
  const creds = await account.ready();
  await checkChat(account, creds, await sandboxChatOf(account, chat));
}

/**
 * Helper: user `phone` edits (`body`) or deletes for everyone (no `body`) message `id`, which must be a stored
 * message that user sent (in a one-to-one chat or a group). An edit needs a text message.
 * @throws DomainError not_found `message not found`; invalid `only text messages can be edited`,
 *   `message <id> was not sent by <phone>`, `message <id> was deleted`; not_logged_in before login.
 */
export async function updateMessage(account: SandboxAccount, input: SandboxUpdateInput): Promise<void> {
  await account.ready();
  const message = await account.context.findMessage(input.id);
  if (!message || message.source.isFromMe) throw errors.notFound('message not found');
  if (message.source.sender !== userJid(input.phone)) {
    throw errors.badRequest(`message ${input.id} was not sent by ${input.phone}`);
  }
  if (message.content.deletedAt !== undefined) throw errors.badRequest(`message ${input.id} was deleted`);
  const source: MessageSource = { ...message.source };
  const timestamp = account.context.clock();
  if (input.body === undefined) {
    await account.context.emit({
      type: 'messageUpdate',
      update: { kind: 'delete', messageId: message.id, source, timestamp },
    });
    return;
  }
  if (message.content.kind !== 'text') throw errors.badRequest('only text messages can be edited');
  await account.context.emit({
    type: 'messageUpdate',
    update: { kind: 'edit', messageId: message.id, source, text: input.body, timestamp },
  });
}

/**
 * Helper: user `phone` votes `options` (names; [] withdraws the vote) on poll `id` the account sent. A group
 * poll's voter must be a member. The vote replaces the user's previous one, as on the platform.
 * @throws DomainError not_found `poll not found`; invalid naming an unknown option, a repeated option, or more
 *   options than the poll allows; not_participant when the voter is not in the poll's chat.
 */
export async function vote(account: SandboxAccount, input: SandboxVoteInput): Promise<void> {
  const creds = await account.ready();
  const poll = await account.context.findMessage(input.id);
  if (!poll?.source.isFromMe || poll.content.kind !== 'poll' || !poll.content.poll) {
    throw errors.notFound('poll not found');
  }
  const { options, selectableCount } = poll.content.poll;
  const voter = userJid(input.phone);
  if (poll.source.isGroup) {
    const group = await memberGroup(account, ownJid(creds), poll.source.chat);
    if (!group.participants.some((p) => p.jid === voter)) {
      throw new DomainError('not_participant', `phone ${input.phone} is not a participant of the group`);
    }
  } else if (poll.source.chat !== voter) {
    throw new DomainError('not_participant', `phone ${input.phone} is not in the chat of the poll`);
  }
  for (const option of input.options) {
    if (!options.includes(option))
      throw errors.badRequest(`options: ${JSON.stringify(option)} is not an option of the poll`);
  }
  if (new Set(input.options).size !== input.options.length) throw errors.badRequest('options must be unique');
  if (selectableCount > 0 && input.options.length > selectableCount) {
    throw errors.badRequest(
      `options must have at most ${selectableCount} item(s): the poll allows ${selectableCount}`,
    );
  }
  await account.context.emit({
    type: 'pollVote',
    vote: {
      pollId: poll.id,
      pollName: poll.content.text ?? '',
      source: { chat: poll.source.chat, sender: voter, isFromMe: false, isGroup: poll.source.isGroup },
      selectedOptions: [...input.options],
      timestamp: account.context.clock(),
    },
  });
}
