/**
 * Account-level faults that outlive a connection, set through `POST /control/faults` (control/faults.ts) and
 * kept in the state file: a blocked account whose logins the platform refuses, messages the server answers with
 * an error ack (a nack, Baileys' `handleBadAck` reads `<ack error>`), and the reach-out timelock that forbids
 * new chats (Baileys' `fetchAccountReachoutTimelock` reads it through a `w:mex` query).
 */
import { type Accounts, phoneJid, type User } from './accounts.ts';

/** The nack code of the platform's reach-out timelock on a message to a new chat (Baileys' NACK_REASONS). */
export const REACHOUT_NACK = 463;

/** What {@link User.restrictions} holds. */
export interface AccountRestrictions {
  /** Every login of the account's devices is answered `<failure reason=N>` (a blocked or banned account). */
  loginFailure?: number;
  /** The next `count` messages the account's devices send are answered `<ack error=code>` and not relayed. */
  nack?: { code: number; count: number };
  /** The reach-out timelock ends at this time, epoch ms (reported by the `w:mex` timelock query). */
  reachoutUntil?: number;
}

/** The `<failure reason>` a login of `user` gets, when the account is blocked. */
export function loginRefusal(user: User): number | undefined {
  return user.restrictions?.loginFailure;
}

/** Consumes one pending nack of `user`: the error code the next message's ack carries, if any. */
export function takeNack(user: User): number | undefined {
  const nack = user.restrictions?.nack;
  if (!nack || nack.count <= 0) return undefined;
  nack.count -= 1;
  if (nack.count === 0 && user.restrictions) delete user.restrictions.nack;
  return nack.code;
}

/** The account's reach-out timelock as of `now` (epoch ms): active with its end, or inactive. */
export function reachoutTimelock(user: User, now: number): { active: boolean; endsAt?: number } {
  const until = user.restrictions?.reachoutUntil;
  return until !== undefined && until > now ? { active: true, endsAt: until } : { active: false };
}

/**
 * True when `to` and `user` have a 1:1 chat: either wrote to the other directly (messages in a group they share,
 * receipts and typing indicators do not make a chat, as on the platform).
 */
function chatExists(user: User, to: User): boolean {
  const account = phoneJid(user.phone);
  if ([...to.sent.values()].some((entry) => entry.to === account)) return true;
  return to.inbox.some(
    (entry) =>
      entry.from === user.phone &&
      entry.type !== 'receipt' &&
      entry.type !== 'chatstate' &&
      entry.group === undefined,
  );
}

/**
 * The error code the server's ack carries for a `<message>` that `user`'s device sends to `toJid`, or undefined
 * when it takes the message: a pending nack first (consumed), then the reach-out timelock, which refuses (463) a
 * message to a user the account has never exchanged messages with while it is active.
 */
export function nackFor(accounts: Accounts, user: User, toJid: string, now: number): number | undefined {
  const pending = takeNack(user);
  if (pending !== undefined) return pending;
  if (!reachoutTimelock(user, now).active) return undefined;
  const to = accounts.resolve(toJid)?.user;
  return to && to !== user && !chatExists(user, to) ? REACHOUT_NACK : undefined;
}
