import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import { BrokerError } from '../brokers/errors.ts';
import { brokerSubject, isBrokerUrl, parseBrokerUrl } from '../brokers/urls.ts';
import { extended } from '../domain/objects.ts';
import { type OutboundChannel, OutboundError } from '../net/outbound-guard.ts';
import type { ClaimedDelivery } from '../store/delivery-claims.ts';
import type { AttemptRecord } from '../store/delivery-finish.ts';
import { webhookHeaders } from './signing.ts';
import type { DeliveryWorkerOptions } from './worker-options.ts';

/**
 * One delivery attempt's request (docs/decisions/0005-outbox-and-delivery.md): the POST to an HTTPS receiver, the
 * publish to a broker endpoint, and the error text the delivery log shows when neither answered. A lane batch's run
 * (`lane-run.ts`) calls these, and its records (`lane-records.ts`) record the outcome.
 */

/**
 * Bytes of a receiver's response body kept in the attempts log (docs/decisions/0005-outbox-and-delivery.md: first 2
 * KB).
 */
export const RESPONSE_LOG_BYTES = 2048;

/**
 * The `error` of a failed attempt as the tenant reads it in the delivery log: only the guard's caller-safe
 * text (docs/decisions/0020-security-promises.md: no resolved address, address class or resolver code; a host
 * resolving to a refused address reads the same as one that does not resolve), or `attempt failed: internal error`.
 * The details go to the server log with the event id.
 */
export function attemptErrorText(
  logger: FastifyBaseLogger,
  delivery: ClaimedDelivery,
  error: unknown,
): string {
  const context = { err: error, eventId: delivery.eventId, instanceId: delivery.instanceId };
  if (error instanceof OutboundError) {
    logger.info(extended(context, { reason: error.reason }), 'webhook attempt failed');
    return error.publicMessage;
  }
  if (error instanceof BrokerError) {
    logger.info(context, 'broker publish failed');
    return error.message;
  }
  logger.warn(context, 'webhook attempt failed before a response');
  return 'attempt failed: internal error';
}

/**
 * Posts a delivery to its HTTPS receiver through the outbound guard and fills `record` from the response
 * (docs/decisions/0005-outbox-and-delivery.md: 2xx delivered, 410 Gone disables, 3xx not followed). With a
 * `channel` (a lane's window, docs/decisions/0058-pipelined-lanes.md) the request is written after the lane's
 * request before it, on the lane's connection. With `endWithinMs` (ms from the call) the request fails as timed out
 * once that much time has passed, whatever its place on the channel: its claim's time left
 * (docs/decisions/0058-pipelined-lanes.md).
 * @returns the response's `retry-after` and whether it was a 410.
 * @throws OutboundError when no response came.
 */
export async function postDelivery(
  { guard, timeoutMs }: Pick<DeliveryWorkerOptions, 'guard' | 'timeoutMs'>,
  delivery: ClaimedDelivery,
  headers: Record<string, string>,
  record: AttemptRecord,
  channel?: OutboundChannel,
  endWithinMs?: number,
): Promise<{ retryAfter: string | undefined; gone: boolean }> {
  let gone = false;
  const response = await guard.request(delivery.url, {
    method: 'POST',
    headers,
    body: delivery.payload,
    timeoutMs,
    maxResponseBytes: RESPONSE_LOG_BYTES,
    onTooLarge: 'truncate',
    ...(channel === undefined ? {} : { channel }),
    ...(endWithinMs === undefined ? {} : { endWithinMs }),
  });
  record.statusCode = response.status;
  record.durationMs = response.durationMs;
  record.responseBody = response.body.toString('utf8').replaceAll('\u0000', '\uFFFD');
  record.responseTruncated = response.truncated;
  if (response.status === 410) {
    gone = true;
    record.error =
      delivery.endpointId === ''
        ? 'receiver answered 410 Gone: webhook disabled'
        : 'receiver answered 410 Gone: endpoint disabled';
  } else if (response.status >= 300 && response.status < 400) {
    record.error = `receiver answered ${response.status}: redirects are not followed`;
  } else if (response.status < 200 || response.status >= 300) {
    record.error = `receiver answered ${response.status}`;
  }
  return { retryAfter: response.headers['retry-after'], gone };
}

/**
 * Publishes a delivery to its broker endpoint (docs/decisions/0037-broker-endpoints.md): the exact body, routing
 * key or subject `parley.<instanceId>.<Type>`, the event id as message id, the Standard Webhooks headers.
 * @returns the broker's receipt, kept as the attempt's response text.
 * @throws BrokerError, OutboundError (the broker host refused), Error (no publishers configured).
 */
export async function publishDelivery(
  { brokers, timeoutMs }: Pick<DeliveryWorkerOptions, 'brokers' | 'timeoutMs'>,
  url: string,
  delivery: ClaimedDelivery,
  headers: Record<string, string>,
  timestampSeconds: number,
): Promise<string> {
  if (brokers === undefined) throw new Error('this worker has no broker publishers');
  const { target } = parseBrokerUrl(url);
  const parsed: unknown = JSON.parse(delivery.payload);
  const type =
    typeof parsed === 'object' && parsed !== null && 'type' in parsed && typeof parsed.type === 'string'
      ? parsed.type
      : 'Event';
  const { 'user-agent': _agent, ...messageHeaders } = headers;
  return brokers.publish(
    target,
    {
      id: delivery.eventId,
      subject: brokerSubject(delivery.instanceId, type),
      type,
      body: delivery.payload,
      headers: messageHeaders,
      timestampSeconds,
    },
    timeoutMs,
    // The lane (instance and endpoint): its attempts reach the broker in the order the lane issued them.
    `${delivery.instanceId}/${delivery.endpointId}`,
  );
}

/**
 * The sealed previous secret that also signs an attempt of `delivery` started at `startedAt` (epoch ms), or null
 * (docs/decisions/0094-secret-rotation-grace.md): an endpoint's rotated-out secret signs while `startedAt` is before
 * its expiry, as the claim read it; a lane batch's later attempts, started after the expiry, are signed with the
 * current secret only.
 */
export function previousSecretSigning(
  delivery: Pick<
    ClaimedDelivery,
    'endpointSecretSealed' | 'previousSecretSealed' | 'previousSecretExpiresAt'
  >,
  startedAt: number,
): string | null {
  const { endpointSecretSealed, previousSecretSealed, previousSecretExpiresAt } = delivery;
  if (endpointSecretSealed === null || previousSecretSealed === null || previousSecretExpiresAt === null)
    return null;
  return startedAt < previousSecretExpiresAt ? previousSecretSealed : null;
}

/** What one attempt's request gave: the attempt row's fields, and a `Retry-After` or 410 answer. */
export interface SentAttempt {
  record: AttemptRecord;
  retryAfter: string | undefined;
  gone: boolean;
}

/**
 * One attempt's request: signs (docs/decisions/0006-signatures.md) and posts through the guard, or publishes to a
 * broker endpoint. Never throws: a failure is the record's `error`; the worker records what it returns. The
 * request is issued before the first wait, so attempts issued one after the other on a `channel` reach the
 * receiver in that order (docs/decisions/0058-pipelined-lanes.md). `endWithinMs` (ms from the call) bounds an HTTPS
 * request's whole time, its waits behind the channel's earlier requests included: the time its claim has left
 * before it could go stale (a broker publish is bounded by `timeoutMs` from the call already).
 */
export async function sendAttempt(
  options: Pick<DeliveryWorkerOptions, 'box' | 'clock' | 'guard' | 'brokers' | 'timeoutMs' | 'logger'>,
  delivery: ClaimedDelivery,
  channel?: OutboundChannel,
  endWithinMs?: number,
): Promise<SentAttempt> {
  const { box, clock } = options;
  const startedAt = clock();
  const started = performance.now();
  const record: AttemptRecord = {
    statusCode: null,
    durationMs: 0,
    error: null,
    responseBody: null,
    responseTruncated: false,
  };
  let retryAfter: string | undefined;
  let gone = false;
  try {
    const hmacKey = delivery.hmacKeySealed === null ? null : box.openKept(delivery.hmacKeySealed);
    const endpointSecret =
      delivery.endpointSecretSealed === null ? null : box.openKept(delivery.endpointSecretSealed);
    const previousSealed = previousSecretSigning(delivery, startedAt);
    const previousEndpointSecret = previousSealed === null ? null : box.openKept(previousSealed);
    const timestampSeconds = Math.floor(startedAt / 1000);
    const headers = webhookHeaders({
      id: delivery.eventId,
      timestampSeconds,
      body: delivery.payload,
      hmacKey,
      ...(endpointSecret === null ? {} : { endpointSecret }),
      ...(previousEndpointSecret === null ? {} : { previousEndpointSecret }),
    });
    const url = delivery.urlSealed === null ? delivery.url : box.openKept(delivery.urlSealed);
    if (isBrokerUrl(url)) {
      record.responseBody = await publishDelivery(options, url, delivery, headers, timestampSeconds);
      record.durationMs = Math.round(performance.now() - started);
    } else {
      ({ retryAfter, gone } = await postDelivery(options, delivery, headers, record, channel, endWithinMs));
    }
  } catch (error) {
    record.durationMs = Math.round(performance.now() - started);
    record.error = attemptErrorText(options.logger, delivery, error);
  }
  return { record, retryAfter, gone };
}
