import { v7 } from 'uuid';

/**
 * A new id for a row written on the hot path (a webhook event, a delivery attempt): a UUID version 7 (RFC 9562,
 * section 5.7), 36 characters, whose first 48 bits are the epoch milliseconds of its creation, monotonic within the
 * process. Ids made one after the other sort one after the other, so the primary-key index and every index that
 * starts with the id take each new row on their last page instead of a random one: a commit dirties a few pages,
 * not one per row and index, and the write-ahead log and its checkpoints shrink with it
 * (docs/decisions/0052-time-ordered-row-ids.md). Still 74 random bits: not guessable from another id.
 */
export function newRowId(): string {
  return v7();
}
