import { createHmac } from 'node:crypto';

/**
 * Webhook signatures (docs/decisions/0006-signatures.md). Both use HMAC-SHA256 with the instance's HMAC key as UTF-8
 * bytes:
 * - `x-hmac-signature`: lowercase hex over the exact body bytes (docs/api.md#headers-and-signatures);
 * - `webhook-signature`: `v1,` + base64 over `${webhook-id}.${webhook-timestamp}.${body}` (Standard Webhooks,
 *   https://www.standardwebhooks.com; verifiable with npm `standardwebhooks`, secret in raw format), which adds
 *   replay protection because the timestamp is signed.
 */

/** Lowercase hex HMAC-SHA256 of `body` under `key` (`x-hmac-signature`, docs/decisions/0006-signatures.md). */
export function hmacHex(key: string, body: string | Buffer): string {
  return createHmac('sha256', Buffer.from(key, 'utf8')).update(body).digest('hex');
}

/**
 * Standard Webhooks signature (`webhook-signature`, docs/decisions/0006-signatures.md): `v1,` + base64 HMAC-SHA256 of
 * `${id}.${timestampSeconds}.${body}` under `key`.
 * @param key the instance's HMAC key (its UTF-8 bytes are the key), or an endpoint secret's decoded bytes.
 * @param timestampSeconds Unix time in whole seconds, as sent in `webhook-timestamp`.
 */
export function standardSignature(
  key: string | Buffer,
  id: string,
  timestampSeconds: number,
  body: string | Buffer,
): string {
  const mac = createHmac('sha256', typeof key === 'string' ? Buffer.from(key, 'utf8') : key)
    .update(`${id}.${timestampSeconds}.`)
    .update(body)
    .digest('base64');
  return `v1,${mac}`;
}

/** What {@link webhookHeaders} needs for one attempt. */
export interface SignInput {
  /** The event id (`webhook-id`), the same on every retry. */
  id: string;
  /** Unix seconds of this attempt (`webhook-timestamp`). */
  timestampSeconds: number;
  /** The exact body text sent. */
  body: string;
  /** The instance's HMAC key in clear, or null when none is configured (then nothing is signed with it). */
  hmacKey: string | null;
  /**
   * An endpoint's secret in clear (`whsec_` + base64, docs/decisions/0035-webhook-endpoints.md): when given,
   * `webhook-signature` is made with its decoded bytes (Standard Webhooks) and no `x-hmac-signature` is sent.
   */
  endpointSecret?: string;
  /**
   * The endpoint's previous secret in clear, while it still signs after a rotation
   * (docs/decisions/0094-secret-rotation-grace.md): `webhook-signature` then carries a second `v1,` entry made with
   * it, after the current secret's, space-separated as Standard Webhooks allows. Ignored without `endpointSecret`.
   */
  previousEndpointSecret?: string;
}

/** Prefix of an endpoint secret (Standard Webhooks). */
export const SECRET_PREFIX = 'whsec_';

/**
 * The HMAC key of a Standard Webhooks secret: the base64 after `whsec_` decoded (docs/decisions/0035-webhook-endpoints.md).
 * @throws TypeError when `secret` does not start with `whsec_`.
 */
export function secretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new TypeError('endpoint secret must start with whsec_');
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
}

/**
 * Headers of one webhook POST (docs/decisions/0006-signatures.md): `content-type`, `user-agent`, `webhook-id`,
 * `webhook-timestamp`, and, when an HMAC key is configured, `x-hmac-signature` and `webhook-signature`; for an
 * endpoint, `webhook-signature` under its secret only, or `v1,<current> v1,<previous>` while a rotated-out secret
 * still signs (docs/decisions/0094-secret-rotation-grace.md).
 */
export function webhookHeaders(input: SignInput): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'parley-webhooks/1',
    'webhook-id': input.id,
    'webhook-timestamp': String(input.timestampSeconds),
  };
  if (input.endpointSecret !== undefined) {
    const secrets =
      input.previousEndpointSecret === undefined
        ? [input.endpointSecret]
        : [input.endpointSecret, input.previousEndpointSecret];
    headers['webhook-signature'] = secrets
      .map((secret) => standardSignature(secretKey(secret), input.id, input.timestampSeconds, input.body))
      .join(' ');
  } else if (input.hmacKey !== null) {
    headers['x-hmac-signature'] = hmacHex(input.hmacKey, input.body);
    headers['webhook-signature'] = standardSignature(
      input.hmacKey,
      input.id,
      input.timestampSeconds,
      input.body,
    );
  }
  return headers;
}
