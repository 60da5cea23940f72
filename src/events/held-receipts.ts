import type { Transaction } from 'kysely';
import type { EngineEvent } from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import type { Database } from '../store/schema.ts';

/**
 * Which ids of each `receipt` event the message projection held for a send not recorded yet (src/store/held-receipts.ts
 * `advanceOrHoldReceipt`, docs/decisions/0104-receipts-before-their-send.md), for the webhook outbox to leave out: a
 * held receipt is reported once its send's message is (src/sends/sent-marks.ts), after it. Kept by transaction, so a
 * batch the recorder tries again starts afresh. The message projection must be used before the outbox (the recorder
 * applies each event over the projections in the order they were added).
 */
export class HeldReceipts {
  readonly #held = new WeakMap<Transaction<Database>, Map<EngineEvent, ReadonlySet<string>>>();

  /** Notes that `event`, applied in `trx`, had its ids `ids` held. */
  note(trx: Transaction<Database>, event: EngineEvent, ids: ReadonlySet<string>): void {
    if (ids.size === 0) return;
    let held = this.#held.get(trx);
    if (held === undefined) {
      held = new Map();
      this.#held.set(trx, held);
    }
    held.set(event, ids);
  }

  /**
   * `event` as it is to be reported in `trx`: itself when nothing of it was held, a copy naming the ids not held, or
   * undefined when every id it names was held.
   */
  reported(trx: Transaction<Database>, event: EngineEvent): EngineEvent | undefined {
    if (event.type !== 'receipt') return event;
    const ids = this.#held.get(trx)?.get(event);
    if (ids === undefined) return event;
    const left = event.messageIds.filter((id) => !ids.has(id));
    if (left.length === 0) return undefined;
    return extended(event, { messageIds: left });
  }
}
