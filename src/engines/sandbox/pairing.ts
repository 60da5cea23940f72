import { createHmac } from 'node:crypto';

/** Lifetime of the first QR code of an attempt, ms (docs/decisions/0016-session-lifecycle.md). */
export const FIRST_CODE_MS = 60_000;
/** Lifetime of each later code, ms (docs/decisions/0016-session-lifecycle.md). */
export const NEXT_CODE_MS = 20_000;
/** Codes per attempt; after the last one expires the attempt ends (docs/decisions/0016-session-lifecycle.md). */
export const CODES_PER_ATTEMPT = 6;
/** Total length of a pairing attempt, ms: 60 s + 5 × 20 s = 160 s. */
export const ATTEMPT_MS = FIRST_CODE_MS + (CODES_PER_ATTEMPT - 1) * NEXT_CODE_MS;

/** Where in a pairing attempt a moment falls: which code is current and when it expires. */
export interface PairingSlot {
  /** 0-based code index, 0…5. */
  index: number;
  /** Epoch ms at which this code stops being valid. */
  expiresAt: number;
}

/**
 * The code slot of an attempt started at `startedAt` as seen at `now` (both epoch ms), or null once the attempt
 * is over (docs/decisions/0016-session-lifecycle.md: first code 60 s, then 20 s each, six codes).
 */
export function pairingSlot(startedAt: number, now: number): PairingSlot | null {
  const elapsed = Math.max(0, now - startedAt);
  if (elapsed >= ATTEMPT_MS) return null;
  const index = elapsed < FIRST_CODE_MS ? 0 : 1 + Math.floor((elapsed - FIRST_CODE_MS) / NEXT_CODE_MS);
  return { index, expiresAt: startedAt + FIRST_CODE_MS + index * NEXT_CODE_MS };
}

/**
 * The sandbox's raw pairing string for code `index` of attempt `attempt` of an instance: shaped like the
 * platform's (`2@<ref>,<noise key>,<identity key>,<adv secret>`, base64 parts), deterministic for its inputs.
 */
export function sandboxPairingCode(instanceId: string, attempt: number, index: number): string {
  const part = (label: string, bytes: number) =>
    createHmac('sha256', 'parley-sandbox-pairing')
      .update(`${instanceId}:${attempt}:${index}:${label}`)
      .digest()
      .subarray(0, bytes)
      .toString('base64');
  return `2@${part('ref', 24)},${part('noise', 32)},${part('identity', 32)},${part('adv', 32)}`;
}

/** The phone number a sandbox scan links when none is given: `1555` + 7 digits derived from the instance id. */
export function defaultSandboxPhone(instanceId: string): string {
  const digest = createHmac('sha256', 'parley-sandbox-phone').update(instanceId).digest();
  const n = digest.readUInt32BE(0) % 10_000_000;
  return `1555${n.toString().padStart(7, '0')}`;
}
