import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { CallSettings } from '../domain/calls.ts';
import type { Clock } from '../domain/clock.ts';
import type { Environment } from '../domain/environment.ts';
import type { EngineMessage } from '../domain/messages.ts';
import type { Engine } from '../engines/engine.ts';
import type { EventRecorder } from '../events/recorder.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { Database } from '../store/schema.ts';
import type { TurnTransactions } from '../store/turn-transactions.ts';
import type { RecordBacklog } from './backlog.ts';
import { RECORD_RETRY, type RecordRetryPolicy } from './record-retry.ts';

/**
 * Dependencies of the session manager (`SessionManager`, src/sessions/manager.ts), which it also hands to every
 * engine session it makes (`createEngineSession`, src/sessions/engine-session.ts).
 */
export interface SessionManagerOptions {
  db: Kysely<Database>;
  box: SecretBox;
  /**
   * The engine for each environment (docs/decisions/0024-engines-and-data-flow.md): sandbox for test, Baileys for
   * live.
   */
  engines: Record<Environment, Engine>;
  recorder: EventRecorder;
  /** Finds a stored message for quoting and platform retries; undefined on a miss. */
  findMessage: (instanceId: string, id: string) => Promise<EngineMessage | undefined>;
  /**
   * Reads an instance's call handling (docs/decisions/0026-chats-edits-polls-and-calls.md); absent: engines never
   * reject calls.
   */
  callSettings?: (instanceId: string) => Promise<CallSettings>;
  logger: FastifyBaseLogger;
  clock: Clock;
  /**
   * Backoff for restoring sessions that failed at boot because the platform was unreachable (503): first delay
   * and cap, ms (default 1,000 and 60,000), doubled per failure with ±20 % jitter.
   */
  restoreRetry?: { baseMs: number; maxMs: number };
  /**
   * Retry of a failed recording of any engine's event and of the engine's credential store
   * (docs/decisions/0011-store-faults.md): first wait and longest wait, ms, and the tries for an unknown error
   * (default {@link RECORD_RETRY}: 100 ms doubling to 5,000 ms, 5 tries); `random` is the jitter source (default
   * `Math.random`). A store that cannot be reached is retried without limit.
   */
  recordRetry?: {
    baseDelayMs?: number;
    maxDelayMs?: number;
    unknownAttempts?: number;
    random?: () => number;
  };
  /** The process's backlog of events waiting to be recorded (default: one of its own). */
  backlog?: RecordBacklog;
  /**
   * The store's shared transaction of each event-loop turn (SQLite only, docs/decisions/0051-turn-groups.md): the
   * engines' credential and key writes run in it; absent, each write has a transaction of its own.
   */
  turn?: TurnTransactions;
}

/**
 * The record retry policy of `retry` ({@link SessionManagerOptions.recordRetry}, docs/decisions/0011-store-faults.md):
 * each field omitted takes its {@link RECORD_RETRY} default (delays in ms), the tries for an unknown error are at
 * least 1, and the jitter source defaults to `Math.random`. Never throws.
 */
export function recordRetryPolicy(retry: SessionManagerOptions['recordRetry']): RecordRetryPolicy {
  return {
    baseDelayMs: retry?.baseDelayMs ?? RECORD_RETRY.baseDelayMs,
    maxDelayMs: retry?.maxDelayMs ?? RECORD_RETRY.maxDelayMs,
    unknownAttempts: Math.max(1, retry?.unknownAttempts ?? RECORD_RETRY.unknownAttempts),
    random: retry?.random ?? Math.random,
  };
}
