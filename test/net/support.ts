import assert from 'node:assert/strict';
import {
  OutboundError,
  type OutboundFailure,
  type OutboundRequest,
  type ResolvedAddress,
} from '../../src/net/outbound-guard.ts';

/** The allowance that lets a guard reach the loopback receivers of these tests (127.0.0.1 only). */
export const LOCAL = ['127.0.0.1/32'];

/** A GET with a 5 s timeout and a 64 KiB cap that refuses a larger answer. */
export const GET: OutboundRequest = {
  method: 'GET',
  timeoutMs: 5_000,
  maxResponseBytes: 65_536,
  onTooLarge: 'error',
};

/** Asserts `run` rejects or throws an {@link OutboundError} with `reason` and a message matching `message`. */
export async function rejectsWith(
  run: () => unknown,
  reason: OutboundFailure,
  message?: RegExp,
): Promise<void> {
  await assert.rejects(
    async () => run(),
    (error: unknown) => {
      assert.ok(error instanceof OutboundError, `expected OutboundError, got ${String(error)}`);
      assert.equal(error.reason, reason, error.message);
      if (message) assert.match(error.message, message);
      return true;
    },
  );
}

/** A lookup override answering from a function of the call number (0-based), counting calls. */
export function scriptedLookup(answer: (call: number, hostname: string) => string[]) {
  const calls: string[] = [];
  const lookup = async (hostname: string): Promise<ResolvedAddress[]> => {
    const addresses = answer(calls.length, hostname);
    calls.push(hostname);
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { lookup, calls };
}
