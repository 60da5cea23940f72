import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

/** Random bytes drawn from the system's generator at once, then handed out 16 to an id. */
const RANDOM_POOL_BYTES = 4096;

/**
 * Random bytes one id takes: `uuid`'s `v7` puts the low 42 bits of bytes 10–15 into the id, and bytes 6–9 seed the
 * counter in a new millisecond.
 */
const ID_RANDOM_BYTES = 16;

let pool = new Uint8Array(0);
let poolOffset = 0;
/** The epoch milliseconds and the 31-bit counter of the last id made (RFC 9562, section 6.2, method 1). */
let lastMs = Number.NEGATIVE_INFINITY;
let counter = 0;

/** The next {@link ID_RANDOM_BYTES} bytes of the pool, refilled from the system's CSPRNG when spent. */
function randomBytes16(): Uint8Array {
  if (poolOffset + ID_RANDOM_BYTES > pool.length) {
    pool = randomFillSync(new Uint8Array(RANDOM_POOL_BYTES));
    poolOffset = 0;
  }
  const bytes = pool.subarray(poolOffset, poolOffset + ID_RANDOM_BYTES);
  poolOffset += ID_RANDOM_BYTES;
  return bytes;
}

/**
 * A new id for a row written on the hot path (a webhook event, a delivery attempt): a UUID version 7 (RFC 9562,
 * section 5.7), 36 characters, whose first 48 bits are the epoch milliseconds of its creation, monotonic within the
 * process. Ids made one after the other sort one after the other, so the primary-key index and every index that
 * starts with the id take each new row on their last page instead of a random one: a commit dirties a few pages,
 * not one per row and index, and the write-ahead log and its checkpoints shrink with it
 * (docs/decisions/0052-time-ordered-row-ids.md). Still 74 random bits: not guessable from another id.
 *
 * Monotonic as RFC 9562 section 6.2 method 1 has it, the way `uuid`'s own `v7` keeps it: in a new millisecond the
 * 31-bit counter starts at a random value; within the same one (or when the clock went back) it counts up, and
 * its overflow moves the time one millisecond on. The random bits come from a pool filled 4 KiB at a time by the
 * system's CSPRNG (`randomFillSync`), as Node's `randomUUID` buffers its own, instead of a call into it per id.
 */
export function newRowId(): string {
  const random = randomBytes16();
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    counter =
      (((random[6] ?? 0) & 0x7f) << 24) |
      ((random[7] ?? 0) << 16) |
      ((random[8] ?? 0) << 8) |
      (random[9] ?? 0);
  } else {
    counter = (counter + 1) & 0x7fffffff;
    if (counter === 0) lastMs += 1;
  }
  return v7({ msecs: lastMs, seq: counter, random });
}
