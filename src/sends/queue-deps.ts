import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineEvent } from '../domain/messages.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { Database } from '../store/schema.ts';
import type { SYNC_WAIT_MS } from './sync-deadline.ts';

/** What the queue reports as it goes (recorded as `MessageStatus` and `SessionStatus` events by the caller). */
export type SendStatusReport =
  | { kind: 'message'; id: string; status: 'sent' | 'failed' | 'canceled'; error?: string; at: number }
  | { kind: 'session'; status: 'paused' | 'resumed'; reason?: string; until?: number; at: number };

/**
 * A write of the send queue whose `MessageStatus` reports commit with it (docs/decisions/0076-status-with-its-write.md):
 * run on `db` (the recorder's transaction), it returns its `result` and the reports its outcome causes (none when it
 * found nothing to change), and any other events to record after them (the receipts held for a job it ended,
 * docs/decisions/0104-receipts-before-their-send.md).
 */
export type ReportedWrite<T> = (
  db: Kysely<Database>,
) => Promise<{ result: T; reports: SendStatusReport[]; events?: EngineEvent[] }>;

/** A `MessageStatus` report of job `id`: its outcome `status` at `at` (epoch ms), with the error of a failure. */
export function messageReport(
  id: string,
  status: 'sent' | 'failed' | 'canceled',
  at: number,
  error?: string,
): SendStatusReport {
  return error === undefined
    ? { kind: 'message', id, status, at }
    : { kind: 'message', id, status, error, at };
}

/** What a send queue (queue.ts `SendQueue`) needs. */
export interface SendQueueDeps {
  db: Kysely<Database>;
  /** The engine session of an instance held by this process, if any (the queue relays only there). */
  session(instanceId: string): EngineSession | undefined;
  /** This node's id: the `locked_by` of the jobs it claims. */
  nodeId: string;
  /**
   * The business clock, epoch ms: the times clients and events see (`MessageStatus`/`SessionStatus` `at`, a pause's
   * and a timelock's `until`, `sent_at`), the pace, the sync wait, and the new-chats window.
   */
  clock: Clock;
  /**
   * The store's clock, epoch ms, the jobs' due times (`run_at`, a retry's `not_before`) are set and judged on: the
   * services pass the node's `StoreClock` (an in-memory estimate, no statement), shared by every node, so a node whose
   * wall clock runs ahead relays no retry before its backoff ran out and one running behind relays it on time
   * (docs/decisions/0112-send-due-times-on-the-store-clock.md). Default: `clock` (a queue built alone in a test).
   */
  storeClock?: Clock;
  logger: FastifyBaseLogger;
  /** Records a status report; a failure is logged, never thrown into the queue. */
  report(instanceId: string, report: SendStatusReport): Promise<void>;
  /**
   * Runs `write` in a transaction that records the reports it returns as events (the event recorder's
   * `recordWith`, after the instance's earlier events), so a job's change and its `MessageStatus` event commit
   * together (docs/decisions/0076-status-with-its-write.md).
   * @returns the write's result, once committed.
   * @throws the write's or the store's error (nothing of it kept, unless the commit's answer was lost: the write's
   *   condition then tells a try again that it is done).
   */
  recordWith<T>(instanceId: string, write: ReportedWrite<T>): Promise<T>;
  /** Random source in [0, 1) for the pace's jitter (tests fix it). */
  random?: () => number;
  /** How often instances with due jobs are looked for, ms (default 5 000). */
  sweepMs?: number;
  /** Longest wait of a synchronous send in the queue before it is failed unsent, ms (default {@link SYNC_WAIT_MS}). */
  syncWaitMs?: number;
}

/**
 * The clock a queue's due times (`run_at`, `not_before`) are set and judged on: `storeClock`, else `clock`
 * (docs/decisions/0112-send-due-times-on-the-store-clock.md).
 */
export function dueClockOf(deps: Pick<SendQueueDeps, 'clock' | 'storeClock'>): Clock {
  return deps.storeClock ?? deps.clock;
}
