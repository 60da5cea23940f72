/**
 * Verifying parley's webhook requests (docs/decisions/0006-signatures.md, docs/api.md "Headers and signatures" and
 * "Webhook endpoints"). Signatures are HMAC-SHA256 over the raw body bytes exactly as received:
 * - `webhook-signature`: space-separated `v1,<base64>` entries, one of which must be the HMAC of
 *   `${webhook-id}.${webhook-timestamp}.${body}` (Standard Webhooks, https://www.standardwebhooks.com), with
 *   `webhook-timestamp` (Unix seconds) within 5 minutes of the receiver's clock, which makes a captured request
 *   useless for a replay. Every signed request carries it.
 * - `x-hmac-signature`: lowercase hex of the HMAC of the body; sent to the instance's webhook only, under the
 *   instance's HMAC key (its UTF-8 bytes), beside `webhook-signature` made with the same key. A webhook endpoint's
 *   requests carry `webhook-signature` alone, made with the bytes of its `whsec_` secret
 *   (docs/decisions/0035-webhook-endpoints.md).
 * Web Crypto only (`crypto.subtle`), so it runs in Node.js 20+, Deno, Bun, browsers and edge runtimes; comparisons
 * are `crypto.subtle.verify`'s, which do not leak where a signature differs.
 */
import type { WebhookEvent } from './types.js';

/** Largest distance between `webhook-timestamp` and the receiver's clock, seconds (Standard Webhooks: 5 minutes). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/**
 * Request headers in any common shape: a Fetch `Headers` (of any realm or package: anything with a `get(name)`
 * method, such as undici's), or Node's `IncomingHttpHeaders`-like record.
 */
export type HeadersLike =
  | Headers
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined>;

/** What {@link verifyWebhook} checks. */
export interface VerifyWebhookInput {
  /** The raw request body, exactly as received (before any JSON parsing): text or bytes. */
  body: string | Uint8Array | ArrayBuffer;
  /** The request headers (names in any case). */
  headers: HeadersLike;
  /**
   * The instance's HMAC key, as configured with `POST /v1/session/hmac/config` (docs/api.md "Session"), for the
   * instance's webhook: parley signs both headers with its UTF-8 bytes, and both are required. Not empty. Give this
   * or `secret`.
   */
  hmacKey?: string | Uint8Array | undefined;
  /**
   * A Standard Webhooks secret, `whsec_` + the base64 of the key's bytes: a webhook endpoint's, as `POST /v1/webhooks`
   * answers it (docs/api.md "Webhook endpoints"), or the instance's HMAC key in that form. `webhook-signature` is
   * required; `x-hmac-signature`, which only the instance's webhook carries, is checked when present. Give this or
   * `hmacKey`.
   */
  secret?: string | undefined;
  /** Largest accepted distance of `webhook-timestamp` from `now`, seconds; default 300. */
  toleranceSeconds?: number | undefined;
  /** The receiver's clock, epoch ms or a Date; default: now. */
  now?: number | Date | undefined;
}

/** A request that passed {@link verifyWebhook}. */
export interface VerifiedWebhook {
  /** `webhook-id`: the event's id, the same on every retry of the event; deduplicate on it. */
  id: string;
  /** `webhook-timestamp`: when this attempt was signed, Unix seconds. */
  timestamp: number;
  /** The parsed body: the event (`type`, `event`, `instanceId`, `sequence`, and `state` on a `ReadReceipt`). */
  payload: WebhookEvent;
}

/**
 * Why a request was refused by {@link verifyWebhook}: `reason` names the header and the rule, e.g.
 * `webhook-signature does not match the body`. Answer such a request 401 and do not process it.
 */
export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}

/**
 * Whether `headers` is a `Headers` object: told by its `get` method rather than `instanceof`, which another realm's
 * or package's `Headers` (undici's, a polyfill's) fails.
 */
function isHeadersObject(headers: HeadersLike): headers is { get(name: string): string | null } {
  return typeof (headers as { get?: unknown }).get === 'function';
}

/** A header's value (the first, when repeated), by case-insensitive name. */
function header(headers: HeadersLike, name: string): string | undefined {
  if (isHeadersObject(headers)) return headers.get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value[0] : value;
}

const encoder = new TextEncoder();

/** Bytes, as Web Crypto takes them (backed by an `ArrayBuffer`). */
type Bytes = Uint8Array<ArrayBuffer>;

/** The UTF-8 bytes of a text, or a copy of given bytes. */
function bytesOf(value: string | Uint8Array | ArrayBuffer): Bytes {
  if (typeof value === 'string') return encoder.encode(value);
  return value instanceof Uint8Array ? new Uint8Array(value) : new Uint8Array(value.slice(0));
}

/** The bytes of `hex` (lowercase or uppercase), or undefined when it is not hex. */
function fromHex(hex: string): Bytes | undefined {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return undefined;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** The bytes of standard base64, or undefined when it is not base64. */
function fromBase64(text: string): Bytes | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/**
 * The key bytes from `hmacKey` or `secret`.
 * @throws TypeError when neither or both are given, `hmacKey` is empty, or `secret` is not `whsec_` and base64 of at
 *   least one byte.
 */
function keyBytes(input: VerifyWebhookInput): Bytes {
  if ((input.hmacKey === undefined) === (input.secret === undefined)) {
    throw new TypeError('verifyWebhook needs exactly one of hmacKey or secret');
  }
  if (input.hmacKey !== undefined) {
    const key = bytesOf(input.hmacKey);
    if (key.length === 0) throw new TypeError('hmacKey must not be empty');
    return key;
  }
  const secret = input.secret ?? '';
  const decoded = secret.startsWith('whsec_') ? fromBase64(secret.slice('whsec_'.length)) : undefined;
  if (decoded === undefined || decoded.length === 0) {
    throw new TypeError('secret must be whsec_ followed by the base64 of the HMAC key');
  }
  return decoded;
}

/** Refuses the request. @throws WebhookVerificationError with `reason`, always. */
function refuse(reason: string): never {
  throw new WebhookVerificationError(reason);
}

/** `a` and `b` joined into one array. */
function concat(a: Bytes, b: Bytes): Bytes {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/**
 * Verifies a webhook request parley sent and returns its event. Checks, in order: `webhook-id` is present,
 * `webhook-timestamp` is Unix seconds within `toleranceSeconds` (default 5 minutes) of `now`, one `v1,` entry of
 * `webhook-signature` matches, `x-hmac-signature` matches, and the body is JSON. With `hmacKey` (the instance's
 * webhook) both signatures are required: parley sends both whenever the instance has an HMAC key
 * (docs/decisions/0006-signatures.md), so a request missing one was not sent by parley as it is. With `secret`,
 * `x-hmac-signature` is checked only when present: a webhook endpoint's requests carry `webhook-signature` alone
 * (docs/decisions/0035-webhook-endpoints.md, docs/decisions/0093-client-verifies-webhook-endpoints.md).
 * @throws WebhookVerificationError with the reason (a header and its rule) when a check fails.
 * @throws TypeError when neither or both of `hmacKey` and `secret` are given, `hmacKey` is empty, or `secret` is not
 *   `whsec_` and base64 of at least one byte.
 */
export async function verifyWebhook(input: VerifyWebhookInput): Promise<VerifiedWebhook> {
  const key = await crypto.subtle.importKey(
    'raw',
    keyBytes(input),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['verify'],
  );
  const body = bytesOf(input.body);
  const id = header(input.headers, 'webhook-id');
  const timestamp = header(input.headers, 'webhook-timestamp');
  const signature = header(input.headers, 'webhook-signature');
  const hex = header(input.headers, 'x-hmac-signature');
  if (!id) refuse('webhook-id is missing');
  if (!timestamp || !/^\d{1,12}$/.test(timestamp)) refuse('webhook-timestamp is missing or not Unix seconds');
  if (!signature) refuse('webhook-signature is missing');
  // Only the instance's webhook carries it; a webhook endpoint's request is signed with `webhook-signature` alone.
  if (!hex && input.hmacKey !== undefined) refuse('x-hmac-signature is missing');
  const seconds = Number(timestamp);
  const now = input.now instanceof Date ? input.now.getTime() : (input.now ?? Date.now());
  const tolerance = input.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  if (Math.abs(now / 1000 - seconds) > tolerance) {
    refuse(`webhook-timestamp is more than ${tolerance} seconds from this clock`);
  }
  const signed = concat(encoder.encode(`${id}.${timestamp}.`), body);
  let standard = false;
  for (const entry of signature.split(' ')) {
    if (!entry.startsWith('v1,')) continue;
    const mac = fromBase64(entry.slice(3));
    if (mac !== undefined && (await crypto.subtle.verify('HMAC', key, mac, signed))) {
      standard = true;
      break;
    }
  }
  if (!standard) refuse('webhook-signature does not match the body');
  if (hex) {
    const mac = fromHex(hex.trim());
    if (mac === undefined || !(await crypto.subtle.verify('HMAC', key, mac, body))) {
      refuse('x-hmac-signature does not match the body');
    }
  }
  let payload: WebhookEvent;
  try {
    payload = JSON.parse(new TextDecoder().decode(body)) as WebhookEvent;
  } catch {
    return refuse('the body is not JSON');
  }
  return { id, timestamp: seconds, payload };
}
