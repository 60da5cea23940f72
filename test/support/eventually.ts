import assert from 'node:assert/strict';

/**
 * Re-checks `check` every 20 ms until it returns a value other than undefined (or false), then resolves with it;
 * fails after `ms` (default 10 s) naming `what`. The one way tests wait for a condition instead of sleeping.
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
