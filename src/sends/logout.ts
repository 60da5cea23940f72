import type { Transaction } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import type { EngineEvent } from '../domain/messages.ts';
import type { Database } from '../store/schema.ts';
import { cancelSendJobsOnLogout } from '../store/send-jobs.ts';

/**
 * What a synchronous send still waiting its turn is answered with when its account logs out
 * (docs/decisions/0074-logout-cancels-pending-sends.md): 409, as a send canceled through the API.
 */
export const LOGGED_OUT_BEFORE_RELAY = 'the message was canceled before its relay: the account logged out';

/** The error {@link LOGGED_OUT_BEFORE_RELAY} names (code `conflict`). */
export function loggedOutBeforeRelay(): DomainError {
  return new DomainError('conflict', LOGGED_OUT_BEFORE_RELAY);
}

/**
 * When `event` is the instance's `SessionStatus` `logged_out` (a logout through the API, or the phone unlinked the
 * device), cancels every `pending` send job of the instance (queued, scheduled, or synchronous and waiting its turn)
 * in the recorder's transaction `trx`, and returns a `MessageStatus` `canceled` event at the logout's time for each,
 * recorded in the same transaction (docs/decisions/0074-logout-cancels-pending-sends.md): what the account accepted
 * never goes out from the next account linked to the instance. Jobs already `sending` are left to their relay, which
 * fails on the closed session, but marked: a relay that would hold one back, or a new holder that would hand one
 * back, cancels it instead (src/store/send-job-claims.ts), and the queue reports its `canceled` then. Any other
 * event: none.
 * @throws the store's error (the recorder retries or fails the whole batch).
 */
export async function cancelOnLogout(
  trx: Transaction<Database>,
  instanceId: string,
  event: EngineEvent,
): Promise<EngineEvent[]> {
  if (event.type !== 'sessionStatus' || event.status !== 'logged_out') return [];
  const ids = await cancelSendJobsOnLogout(trx, instanceId, event.at);
  return ids.map((id): EngineEvent => ({ type: 'messageStatus', id, status: 'canceled', at: event.at }));
}
