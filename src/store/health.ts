import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.ts';

/**
 * The reads behind the dashboard's health charts (docs/decisions/0042-dashboard-health.md): message counts per time
 * bucket, the webhook attempts of a window, and session status changes. Times are epoch ms
 * (docs/decisions/0027-times-as-epoch-ms.md); buckets are numbered from `since`, `bucketMs` wide.
 */

/** Sent and received messages of one bucket. */
export interface MessageBucketRow {
  bucket: number;
  sent: number;
  received: number;
}

/**
 * Messages of `instanceIds` whose platform timestamp lies in [`since`, `until`), counted per bucket and direction.
 * @returns only buckets holding a message, in bucket order.
 * @throws TypeError when `since` or `bucketMs` is not a safe integer or `bucketMs` ≤ 0.
 */
export async function messageBuckets(
  db: Kysely<Database>,
  instanceIds: readonly string[],
  since: number,
  until: number,
  bucketMs: number,
): Promise<MessageBucketRow[]> {
  if (instanceIds.length === 0) return [];
  // Literal numbers, not parameters: PostgreSQL matches the GROUP BY expression to the selected one only when both
  // are the same text, and two parameter lists would number them differently.
  if (!Number.isSafeInteger(since) || !Number.isSafeInteger(bucketMs) || bucketMs <= 0)
    throw new TypeError('since and bucketMs must be integers (ms), bucketMs > 0');
  const bucket = sql<number>`cast((timestamp - ${sql.lit(since)}) / ${sql.lit(bucketMs)} as integer)`;
  const rows = await db
    .selectFrom('messages')
    .select([
      bucket.as('bucket'),
      sql<number>`sum(case when from_me = 1 then 1 else 0 end)`.as('sent'),
      sql<number>`sum(case when from_me = 1 then 0 else 1 end)`.as('received'),
    ])
    .where('instance_id', 'in', instanceIds)
    .where('timestamp', '>=', since)
    .where('timestamp', '<', until)
    .groupBy(bucket)
    .orderBy(bucket)
    .execute();
  return rows.map((row) => ({
    bucket: Number(row.bucket),
    sent: Number(row.sent),
    received: Number(row.received),
  }));
}

/** One finished webhook attempt: when it started, how long it took, whether it failed. */
export interface AttemptRow {
  attemptedAt: number;
  durationMs: number;
  failed: boolean;
}

/** Longest an event may wait for an attempt and still be counted: events older than this before `since` are skipped. */
const EVENT_LOOKBACK_MS = 2 * 24 * 60 * 60 * 1000;

/**
 * The finished webhook attempts (default webhook and every endpoint) of events of `instanceIds`, started in
 * [`since`, `until`). An attempt failed when it recorded an error (no answer, a non-2xx answer, a broker refusal).
 * Events recorded more than two days before `since` are not looked at (their retries are long over).
 */
export async function attemptsIn(
  db: Kysely<Database>,
  instanceIds: readonly string[],
  since: number,
  until: number,
): Promise<AttemptRow[]> {
  if (instanceIds.length === 0) return [];
  const rows = await db
    .selectFrom('webhook_attempts as a')
    .innerJoin('webhook_events as e', 'e.id', 'a.event_id')
    .select(['a.attempted_at', 'a.duration_ms', 'a.error'])
    .where('e.instance_id', 'in', instanceIds)
    .where('e.created_at', '>=', since - EVENT_LOOKBACK_MS)
    .where('a.attempted_at', '>=', since)
    .where('a.attempted_at', '<', until)
    .where('a.finished_at', 'is not', null)
    .execute();
  return rows.map((row) => ({
    attemptedAt: Number(row.attempted_at),
    durationMs: Number(row.duration_ms ?? 0),
    failed: row.error !== null,
  }));
}

/** A session status event: the instance, when, and its `event.status` (`connected`, `disconnected`, …). */
export interface StatusRow {
  instanceId: string;
  at: number;
  status: string;
}

/**
 * The `SessionStatus` events of `instanceIds` recorded in [`since`, `until`), in order, plus for each instance the
 * last one before `since` (its state when the window opens).
 */
export async function statusChanges(
  db: Kysely<Database>,
  instanceIds: readonly string[],
  since: number,
  until: number,
): Promise<StatusRow[]> {
  if (instanceIds.length === 0) return [];
  const inWindow = await db
    .selectFrom('webhook_events')
    .select(['instance_id', 'created_at', 'payload'])
    .where('instance_id', 'in', instanceIds)
    .where('type', '=', 'SessionStatus')
    .where('created_at', '>=', since)
    .where('created_at', '<', until)
    .orderBy('instance_id')
    .orderBy('sequence')
    .execute();
  const before = await Promise.all(
    instanceIds.map((id) =>
      db
        .selectFrom('webhook_events')
        .select(['instance_id', 'created_at', 'payload'])
        .where('instance_id', '=', id)
        .where('type', '=', 'SessionStatus')
        .where('created_at', '<', since)
        .orderBy('sequence', 'desc')
        .limit(1)
        .executeTakeFirst(),
    ),
  );
  const rows = [...before.filter((row) => row !== undefined), ...inWindow];
  return rows.map((row) => ({
    instanceId: row.instance_id,
    at: Number(row.created_at),
    status: statusOf(row.payload),
  }));
}

/** `event.status` of a stored SessionStatus body, or `unknown`. */
function statusOf(payload: string): string {
  const parsed: unknown = JSON.parse(payload);
  if (typeof parsed !== 'object' || parsed === null || !('event' in parsed)) return 'unknown';
  const { event } = parsed;
  if (typeof event !== 'object' || event === null || !('status' in event)) return 'unknown';
  return typeof event.status === 'string' ? event.status : 'unknown';
}
