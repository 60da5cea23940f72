import { errors } from '../domain/errors.ts';
import type { EventType } from '../domain/instance.ts';
import type { LogEntry, LogStatus } from '../store/webhook-log.ts';

/**
 * The delivery log as the API shows it (docs/decisions/0005-outbox-and-delivery.md `GET /v1/webhook/deliveries`): one
 * entry per event with its delivery state and every attempt. Times are RFC 3339 UTC.
 */

/** One attempt as listed. */
export interface AttemptView {
  number: number;
  /** When the attempt started. */
  at: string;
  /** When it ended; null while in flight. */
  finishedAt: string | null;
  url: string;
  statusCode: number | null;
  durationMs: number | null;
  error: string | null;
  responseBody: string | null;
  responseTruncated: boolean;
}

/** One event of the log as listed. */
export interface DeliveryView {
  id: string;
  type: EventType;
  sequence: number;
  status: LogStatus;
  reason: string | null;
  createdAt: string;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  lastError: string | null;
  payload: unknown;
  attempts: AttemptView[];
}

function statusOf(entry: LogEntry): LogStatus {
  const status = entry.delivery?.status;
  return status === 'pending' || status === 'delivered' || status === 'failed' ? status : 'unsent';
}

/** Converts a stored log entry into its API form. */
export function toDeliveryView(entry: LogEntry): DeliveryView {
  const status = statusOf(entry);
  const delivery = entry.delivery;
  return {
    id: entry.id,
    type: entry.type as EventType,
    sequence: entry.sequence,
    status,
    reason: entry.skipReason,
    createdAt: entry.createdAt,
    nextAttemptAt: status === 'pending' && delivery !== null ? iso(delivery.run_at) : null,
    deliveredAt: delivery === null || delivery.delivered_at === null ? null : iso(delivery.delivered_at),
    lastError: delivery?.last_error ?? null,
    payload: JSON.parse(entry.payload) as unknown,
    attempts: entry.attempts.map((attempt) => ({
      number: attempt.number,
      at: iso(attempt.attempted_at),
      finishedAt: attempt.finished_at === null ? null : iso(attempt.finished_at),
      url: attempt.url,
      statusCode: attempt.status_code,
      durationMs: attempt.duration_ms,
      error: attempt.error,
      responseBody: attempt.response_body,
      responseTruncated: attempt.response_truncated === 1,
    })),
  };
}

/** A stored time (epoch ms) as the API shows it. */
function iso(ms: number): string {
  return new Date(Number(ms)).toISOString();
}

const CURSOR_PREFIX = 'seq.';

/** The opaque cursor of the page after an entry with `sequence` (base64url text). */
export function encodeCursor(sequence: number): string {
  return Buffer.from(`${CURSOR_PREFIX}${sequence}`, 'utf8').toString('base64url');
}

/**
 * The sequence a cursor made by {@link encodeCursor} stands for.
 * @throws DomainError invalid `cursor is invalid` for anything else.
 */
export function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = /^seq\.(\d{1,15})$/.exec(text);
  const value = Number(match?.[1]);
  if (!match || !Number.isSafeInteger(value) || value < 1) throw errors.badRequest('cursor is invalid');
  return value;
}
