import { DomainError } from '../../domain/errors.ts';
import { type LidMapping, lidOfJid } from '../../domain/lids.ts';
import type { Jid } from '../../domain/messages.ts';
import { userJid } from '../../domain/messages.ts';
import type { SandboxAccount } from './account.ts';
import { isValidPhone } from './users.ts';

/**
 * LIDs on the simulated platform (docs/decisions/0038-lid-mappings.md, docs/decisions/0004-sandbox.md). Every
 * registered sandbox user has a LID, computed from the phone number so no table is needed and any LID can be
 * traced back: the number's length in two digits, then its digits reversed (`5511988887777` → `137777888891155`;
 * an 8-digit number gives a 10-digit LID, a 15-digit number a 17-digit one). The sandbox tells the account a user's
 * pair (a `lid-mapping` event) the first time, in a session, that the user writes to it or is written to.
 */

/** The LID (digits) of sandbox phone number `phone` (8 to 15 digits), by the rule above. */
export function sandboxLidOf(phone: string): string {
  return `${String(phone.length).padStart(2, '0')}${[...phone].reverse().join('')}`;
}

/** The phone number behind sandbox LID `lid` (digits), or null when `lid` is not one the rule above makes. */
export function sandboxPhoneOfLid(lid: string): string | null {
  const length = Number(lid.slice(0, 2));
  const reversed = lid.slice(2);
  if (!/^[0-9]{2}/.test(lid) || reversed.length !== length) return null;
  const phone = [...reversed].reverse().join('');
  return isValidPhone(phone) ? phone : null;
}

/**
 * The one name the simulated platform keeps a user's chat under in the account's own state (chat actions, chat
 * labels): the phone JID for a `<lid>@lid` the rule above makes, whether parley knows the pair or not (the chat is
 * one chat whatever it is named by); anything else as it is.
 */
export function sandboxChatKey(chat: Jid): Jid {
  const lid = lidOfJid(chat);
  const phone = lid === null ? null : sandboxPhoneOfLid(lid);
  return phone === null ? chat : userJid(phone);
}

/**
 * The pair of a registered sandbox user, asked by LID (digits) or by phone; null when the number is not a
 * registered user or the LID belongs to none.
 */
export async function sandboxLidMapping(
  account: SandboxAccount,
  query: { lid: string } | { phone: string },
): Promise<LidMapping | null> {
  const phone = 'lid' in query ? sandboxPhoneOfLid(query.lid) : query.phone;
  if (phone === null || !isValidPhone(phone)) return null;
  const user = await account.world.user(phone);
  return user.registered ? { lid: sandboxLidOf(phone), phone } : null;
}

/**
 * The phone JID a send to `chat` goes to: a `<lid>@lid` chat becomes the phone JID of the user owning the LID;
 * anything else is returned as is. Records the pair when it is the first time in this session.
 * @throws DomainError not_registered `recipient <lid>@lid is not registered on the platform` when no registered
 *   user owns the LID.
 */
export async function sandboxChatOf(account: SandboxAccount, chat: Jid): Promise<Jid> {
  const lid = lidOfJid(chat);
  if (lid === null) return chat;
  const mapping = await sandboxLidMapping(account, { lid });
  if (!mapping)
    throw new DomainError('not_registered', `recipient ${chat} is not registered on the platform`);
  await revealLid(account, mapping.phone);
  return userJid(mapping.phone);
}

/** Most phones a session remembers having told the account the LID of (then it starts over). */
const REVEALED_CAPACITY = 10_000;

/**
 * Tells the account the LID of registered user `phone` (a `lid-mapping` event), once per session: the platform
 * names the LID beside the phone on the first stanza it relays from or to that user.
 */
export async function revealLid(account: SandboxAccount, phone: string): Promise<void> {
  if (account.revealedLids.has(phone)) return;
  if (account.revealedLids.size >= REVEALED_CAPACITY) account.revealedLids.clear();
  await account.context.emit({ type: 'lid-mapping', mappings: [{ lid: sandboxLidOf(phone), phone }] });
  account.revealedLids.add(phone);
}
