import type { Transaction } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import type { EngineEvent } from '../domain/messages.ts';
import { nextAccountGeneration } from '../store/account-generations.ts';
import { takeHeldReceipts } from '../store/held-receipts.ts';
import type { Database } from '../store/schema.ts';
import { cancelSendJobsOnLogout } from '../store/send-jobs.ts';
import { endAccountRestrictions, retireAccountRelays } from '../store/send-pacing.ts';
import { DAY_MS } from './pause.ts';

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
 * How far before a logout its mark reaches back among the account's relays, ms: the new-chats window (a day), and an
 * hour more for the clocks of the nodes that count it later (src/store/send-pacing.ts `retireAccountRelays`).
 */
export const RETIRED_RELAYS_MS = DAY_MS + 3_600_000;

/**
 * When `event` is the instance's `SessionStatus` `logged_out` (a logout through the API, or the phone unlinked the
 * device), ends what belonged to the account that logged out, in the recorder's transaction `trx`, so it commits with
 * the logout's event or not at all:
 * - the instance's account generation (`instances.account_generation`) moves, so a send accepted before the logout
 *   whose job is not stored yet stores nothing (src/store/send-jobs.ts `insertAcceptedSendJobs`);
 * - every `pending` send job of the instance (queued, scheduled, or synchronous and waiting its turn) is canceled,
 *   with a `MessageStatus` `canceled` event at the logout's time for each, recorded in the same transaction
 *   (docs/decisions/0074-logout-cancels-pending-sends.md): what the account accepted never goes out from the next
 *   account linked to the instance. Jobs already `sending` are left to their relay, which fails on the closed
 *   session, but marked: a relay that would hold one back, or a new holder that would hand one back, cancels it
 *   instead (src/store/send-job-claims.ts), and the queue reports its `canceled` then;
 * - the account's pacing state (docs/decisions/0013-pacing.md): the platform's restriction pause and reach-out
 *   timelock are cleared, and its relays of the last {@link RETIRED_RELAYS_MS} are marked, so the chats it opened
 *   count against no new-chats cap of the next account; the pace the user set on the instance stays. The node's
 *   memory of them is dropped after the commit (queue.ts `SendQueue.afterCommit`).
 * @returns the `canceled` events, then the receipts held for those jobs
 *   (docs/decisions/0104-receipts-before-their-send.md); none for any other event.
 * @throws the store's error (the recorder retries or fails the whole batch).
 */
export async function endAccountOnLogout(
  trx: Transaction<Database>,
  instanceId: string,
  event: EngineEvent,
): Promise<EngineEvent[]> {
  if (event.type !== 'sessionStatus' || event.status !== 'logged_out') return [];
  // The account's generation moves first: a send job accepted under the one before is not inserted once this commits,
  // and on PostgreSQL an insert that read it (`for share`) holds this write until its jobs are committed, so the
  // cancel below sees them (src/store/send-jobs.ts `insertAcceptedSendJobs`).
  await nextAccountGeneration(trx, instanceId);
  // The jobs first, then the pace's row: the order a pace set through the API writes them in.
  const ids = await cancelSendJobsOnLogout(trx, instanceId, event.at);
  await retireAccountRelays(trx, instanceId, event.at - RETIRED_RELAYS_MS, event.at);
  await endAccountRestrictions(trx, instanceId, event.at);
  const canceled = ids.map(
    (id): EngineEvent => ({ type: 'messageStatus', id, status: 'canceled', at: event.at }),
  );
  // A job handed back after an unconfirmed relay may hold receipts: they follow its outcome (held-receipts.ts).
  return [...canceled, ...(await takeHeldReceipts(trx, instanceId, ids))];
}
