/** Source of the current time in epoch milliseconds; injected so tests can move time. */
export type Clock = () => number;

/**
 * `clock` made never to go back (epoch ms): each reading is the greater of its own and the one before. For a clock
 * that steps back when it is corrected, such as the store's clock as a node estimates it (src/nodes/store-clock.ts:
 * each reading of the store moves the estimate by up to half a round trip either way), where a later reading must
 * not come before an earlier one: send jobs' due times, which order an instance's queue before acceptance does
 * (docs/decisions/0112-send-due-times-on-the-store-clock.md).
 */
export function neverBack(clock: Clock): Clock {
  let last = Number.NEGATIVE_INFINITY;
  return () => {
    last = Math.max(last, clock());
    return last;
  };
}
