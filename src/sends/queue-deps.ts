import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { Database } from '../store/schema.ts';
import type { SYNC_WAIT_MS } from './sync-deadline.ts';

/** What the queue reports as it goes (recorded as `MessageStatus` and `SessionStatus` events by the caller). */
export type SendStatusReport =
  | { kind: 'message'; id: string; status: 'sent' | 'failed' | 'canceled'; error?: string; at: number }
  | { kind: 'session'; status: 'paused' | 'resumed'; reason?: string; until?: number; at: number };

/** What a send queue (queue.ts `SendQueue`) needs. */
export interface SendQueueDeps {
  db: Kysely<Database>;
  /** The engine session of an instance held by this process, if any (the queue relays only there). */
  session(instanceId: string): EngineSession | undefined;
  /** This node's id: the `locked_by` of the jobs it claims. */
  nodeId: string;
  clock: Clock;
  logger: FastifyBaseLogger;
  /** Records a status report; a failure is logged, never thrown into the queue. */
  report(instanceId: string, report: SendStatusReport): Promise<void>;
  /** Random source in [0, 1) for the pace's jitter (tests fix it). */
  random?: () => number;
  /** How often instances with due jobs are looked for, ms (default 5 000). */
  sweepMs?: number;
  /** Longest wait of a synchronous send in the queue before it is failed unsent, ms (default {@link SYNC_WAIT_MS}). */
  syncWaitMs?: number;
}
