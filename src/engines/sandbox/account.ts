import type { BoundedMap } from '../../domain/bounded-map.ts';
import type { EngineCall } from '../../domain/calls.ts';
import type { Jid } from '../../domain/messages.ts';
import { userJid } from '../../domain/messages.ts';
import type { EngineSessionContext } from '../engine.ts';
import type { SequenceAllocator } from './ids.ts';
import type { SandboxWorld } from './world.ts';

/**
 * The auth-port category of the account's own simulated state (profile and blocklist, chat actions, labels: ids
 * `<kind>:<phone>`), written only by the instance's session.
 */
export const ACCOUNT_CATEGORY = 'sandbox-account';

/** What the sandbox stores as an instance's credentials (auth category `creds`, id `self`). */
export interface SandboxCredentials {
  phone: string;
  /** Device-qualified JID, `<phone>.0:1@s.whatsapp.net` (docs/api.md#conventions). */
  jid: Jid;
  pushName: string;
}

/**
 * What the sandbox's operations (messaging, groups, helpers) need from a session: its context, its simulated
 * world, its id sequence, and the logged-in account.
 */
export interface SandboxAccount {
  readonly context: EngineSessionContext;
  readonly world: SandboxWorld;
  readonly sequence: SequenceAllocator;
  /**
   * The credentials of the logged-in, connected account.
   * @throws DomainError not_logged_in `instance is not logged in` before login, not_connected `instance is not connected` when
   *   logged in but disconnected (docs/decisions/0001-envelope-and-error-codes.md).
   */
  ready(): Promise<SandboxCredentials>;
  /** Phones whose LID this session already told the account (lids.ts `revealLid`); kept by the session. */
  readonly revealedLids: Set<string>;
  /**
   * The calls of this session by call id, with their last status (calls.ts; kept by the session, in memory, at most
   * the latest 1,000): what `rejectCall` checks.
   */
  readonly calls: BoundedMap<string, EngineCall>;
}

/** The account's plain user JID (no device part), as it appears in chats and group participant lists. */
export function ownJid(creds: SandboxCredentials): Jid {
  return userJid(creds.phone);
}

/**
 * The tail of each session's chain of account changes, by its world (the session's {@link SandboxAccount} is a new
 * view on each call; its world is the session's own): see {@link changeSerially}.
 */
const changing = new WeakMap<SandboxAccount['world'], Promise<unknown>>();

/**
 * Runs `change` once every account change of the session started before it has ended, whether it succeeded or not,
 * and resolves or rejects as it does. Each change (a group's participants or settings, the profile, privacy, the
 * blocklist, a chat's state, a star) reads a stored record, changes it and saves it whole, so two at once would each
 * save their own copy: one change would be lost, or reported twice.
 */
export function changeSerially<T>(account: SandboxAccount, change: () => Promise<T>): Promise<T> {
  const run = (changing.get(account.world) ?? Promise.resolve()).then(change, change);
  changing.set(
    account.world,
    run.catch(() => undefined),
  );
  return run;
}
