import { createHmac, timingSafeEqual } from 'node:crypto';
import { DomainError } from '../../domain/errors.ts';

/** How far `x-timestamp` may be from the server clock, seconds (docs/decisions/0021-gateway-form.md: ±300 s). */
export const SIGNATURE_WINDOW_SECONDS = 300;

/** The one message of a missing or wrong request signature (docs/decisions/0021-gateway-form.md). */
export const INVALID_SIGNATURE = 'invalid request signature';

/** What a signature covers (docs/decisions/0021-gateway-form.md). */
export interface SignedRequest {
  /** `x-timestamp`: Unix seconds, as sent. */
  timestamp: string;
  /** HTTP method, uppercase. */
  method: string;
  /** The path with its query exactly as requested (e.g. `/user/info?phone=5511999990000`). */
  pathWithQuery: string;
  /** The exact body bytes; empty when the request has no body. */
  body: Buffer;
}

/**
 * The request signature of docs/decisions/0021-gateway-form.md: HMAC-SHA256 keyed with the UTF-8 bytes of the
 * instance's HMAC key over `${timestamp}.${METHOD}.${path with query}.${raw body}`, as 32 raw bytes (lowercase hex on
 * the wire).
 */
export function gatewaySignature(key: string, request: SignedRequest): Buffer {
  return createHmac('sha256', Buffer.from(key, 'utf8'))
    .update(`${request.timestamp}.${request.method}.${request.pathWithQuery}.`, 'utf8')
    .update(request.body)
    .digest();
}

/**
 * Checks `x-timestamp` and `x-signature` of a gateway request (docs/decisions/0021-gateway-form.md): present and well
 * formed, the HMAC equal in constant time, the timestamp within {@link SIGNATURE_WINDOW_SECONDS} of `nowMs` (in whole
 * Unix seconds). Replay is the caller's check (it needs the shared store).
 * @returns the timestamp in Unix seconds and the signature in lowercase hex (the replay key).
 * @throws DomainError unauthenticated `invalid request signature` when missing or wrong, with a reason suffix when
 *   the timestamp is outside the window.
 */
export function verifyGatewaySignature(
  key: string,
  headers: { timestamp: unknown; signature: unknown },
  request: Omit<SignedRequest, 'timestamp'>,
  nowMs: number,
): { timestamp: number; signature: string } {
  const { timestamp, signature } = headers;
  if (typeof timestamp !== 'string' || !/^[0-9]{1,12}$/.test(timestamp)) throw invalidSignature();
  if (typeof signature !== 'string' || !/^[0-9a-fA-F]{64}$/.test(signature)) throw invalidSignature();
  const expected = gatewaySignature(key, { ...request, timestamp });
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) throw invalidSignature();
  const seconds = Number(timestamp);
  if (Math.abs(Math.floor(nowMs / 1000) - seconds) > SIGNATURE_WINDOW_SECONDS) {
    throw invalidSignature(
      `x-timestamp is more than ${SIGNATURE_WINDOW_SECONDS} seconds from the server time`,
    );
  }
  return { timestamp: seconds, signature: signature.toLowerCase() };
}

/**
 * A 401 for a request signature (docs/decisions/0021-gateway-form.md), optionally saying why beyond the bare message.
 */
export function invalidSignature(reason?: string): DomainError {
  return new DomainError('unauthenticated', reason ? `${INVALID_SIGNATURE}: ${reason}` : INVALID_SIGNATURE);
}
