import { timingSafeEqual } from 'node:crypto';
import { hmacHex, standardSignature } from './signing.ts';

/**
 * Verification of the two webhook signatures parley sends (the receiving side of ./signing.ts): what a receiver
 * does, and what `parley listen` does for every request it gets. Both are HMAC-SHA256 under the instance's HMAC
 * key (UTF-8 bytes), computed over the raw body bytes exactly as received.
 */

/** Largest distance between `webhook-timestamp` and the receiver's clock, seconds (Standard Webhooks: 5 min). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** The result of one check: valid, or why not (a sentence naming the header). */
export type SignatureCheck = { valid: true } | { valid: false; reason: string };

/** Compares two strings in constant time for equal lengths. */
function same(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Checks `x-hmac-signature`: lowercase hex HMAC-SHA256 of `body` under `key`.
 * @param header the header's value, undefined when absent.
 */
export function verifyHmacSignature(key: string, body: Buffer, header: string | undefined): SignatureCheck {
  if (header === undefined || header === '') return { valid: false, reason: 'x-hmac-signature is missing' };
  return same(header.trim().toLowerCase(), hmacHex(key, body))
    ? { valid: true }
    : { valid: false, reason: 'x-hmac-signature does not match the body' };
}

/** The Standard Webhooks headers of one request (undefined when absent). */
export interface StandardHeaders {
  'webhook-id': string | undefined;
  'webhook-timestamp': string | undefined;
  'webhook-signature': string | undefined;
}

/**
 * Checks `webhook-signature` (Standard Webhooks, https://www.standardwebhooks.com): one of its space-separated
 * `v1,<base64>` entries must equal the HMAC-SHA256 of `${webhook-id}.${webhook-timestamp}.${body}`, and the
 * timestamp (Unix seconds) must be within {@link SIGNATURE_TOLERANCE_SECONDS} of `nowSeconds` (replay guard).
 */
export function verifyStandardSignature(
  key: string,
  body: Buffer,
  headers: StandardHeaders,
  nowSeconds: number,
): SignatureCheck {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signature = headers['webhook-signature'];
  if (!id) return { valid: false, reason: 'webhook-id is missing' };
  if (!signature) return { valid: false, reason: 'webhook-signature is missing' };
  if (!timestamp || !/^\d{1,12}$/.test(timestamp)) {
    return { valid: false, reason: 'webhook-timestamp is missing or not Unix seconds' };
  }
  const seconds = Number(timestamp);
  if (Math.abs(nowSeconds - seconds) > SIGNATURE_TOLERANCE_SECONDS) {
    return {
      valid: false,
      reason: `webhook-timestamp is more than ${SIGNATURE_TOLERANCE_SECONDS} seconds from this clock`,
    };
  }
  const expected = standardSignature(key, id, seconds, body);
  const match = signature
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .some((entry) => same(entry, expected));
  return match ? { valid: true } : { valid: false, reason: 'webhook-signature does not match the body' };
}
