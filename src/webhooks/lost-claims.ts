import { type ClaimedDelivery, claimKeptAfterLostCommit } from '../store/delivery-claims.ts';
import { untilStoreAnswers } from '../store/faults.ts';
import type { DeliveryWorkerOptions } from './worker-options.ts';

/**
 * Whether the webhook claim of `claimed`, whose commit lost its answer with `error`, was committed after all
 * (docs/decisions/0011-store-faults.md). The store then holds the rows locked by the worker and their heads'
 * attempts started, and nothing else would send them before the claim went stale (logging each head's attempt
 * abandoned though no request went out): the worker is to send them as the claim's answer would have had it send
 * them. Waits out a store that cannot be reached for up to `waitMs` (the worker gives half its stale timeout), or
 * until `signal` aborts (the worker stops); false then, and the claim, if it was made, is left to go stale. Logs the
 * question and its answer with the worker's logger. Never throws.
 */
export async function claimMadeAfterLostCommit(
  options: Pick<DeliveryWorkerOptions, 'store' | 'clock' | 'logger'>,
  claimed: readonly ClaimedDelivery[],
  error: unknown,
  waitMs: number,
  signal: AbortSignal,
): Promise<boolean> {
  const { store, clock, logger } = options;
  logger.warn(
    { err: error },
    'the commit of a webhook claim lost its answer; asking the store whether it was made',
  );
  try {
    const kept = await untilStoreAnswers(
      () => claimKeptAfterLostCommit(store.db, claimed),
      clock,
      clock() + waitMs,
      signal,
    );
    if (kept)
      logger.info({ deliveries: claimed.length }, 'the webhook claim whose commit lost its answer was made');
    return kept;
  } catch (check) {
    logger.warn(
      { err: check },
      'asking whether a webhook claim was made failed; its deliveries wait until the claim goes stale',
    );
    return false;
  }
}
