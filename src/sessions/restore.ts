import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { DomainError, SessionLockHeldError } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { listInstancesToRestore } from '../store/instances.ts';
import type { Database } from '../store/schema.ts';
import { isTransientStoreError } from './record-retry.ts';

/**
 * An instance as a list of instances to restore read it, and the count of stops ({@link SessionManager.stops}) taken
 * before that read: while the count has not moved, the row is as current as the store as to being wanted connected.
 */
export interface ListedInstance {
  instance: Instance;
  stops: number;
}

/**
 * Whether a boot restore that failed with `error` is tried again with backoff (one node,
 * docs/decisions/0016-session-lifecycle.md): when the platform could not be reached (503 platform_unreachable), the
 * store did not answer ({@link isTransientStoreError}: `store_unavailable`, a serialization failure or deadlock;
 * docs/decisions/0011-store-faults.md), or another process holds the instance's one-socket lock
 * ({@link SessionLockHeldError}: a process killed while connected leaves it live until it expires,
 * docs/decisions/0117-boot-restores-wait-out-a-dead-process-lock.md), so the restore is retried until its dependency
 * answers or the lock is free. Any other failure (the platform's refusal) leaves the session stopped until `connect`.
 */
export function restoreRetried(error: unknown): boolean {
  return (
    (error instanceof DomainError && error.code === 'platform_unreachable') ||
    error instanceof SessionLockHeldError ||
    isTransientStoreError(error)
  );
}

/** Why a boot restore that failed with `error` is retried ({@link restoreRetried}), for its log line. */
function retriedBecause(error: unknown): string {
  if (error instanceof SessionLockHeldError) return 'another process holds its one-socket lock';
  return isTransientStoreError(error) ? 'the store did not answer' : 'platform unreachable';
}

/**
 * Whether the lease keeper's next round tries a restore that failed with `error` again (several nodes,
 * docs/decisions/0008-leases-and-fencing.md): every failure but the platform's refusal (502 platform_refused: the
 * session replaced, the account refused), which leaves the session stopped until `connect`, as on one node. A
 * platform out of reach, a store that did not answer, the one-socket lock still held by the instance's previous
 * owner all pass, and the keeper's rounds go on until it connects.
 */
export function keeperRetries(error: unknown): boolean {
  return !(error instanceof DomainError && error.code === 'platform_refused');
}

/** Dependencies of a {@link SessionRestorer}. */
export interface SessionRestorerOptions {
  db: Kysely<Database>;
  logger: FastifyBaseLogger;
  /**
   * Backoff for a restore that failed because the platform or the store did not answer ({@link restoreRetried}), and
   * for the list of instances to restore when the store did not answer it: first delay and cap, ms (default 1,000
   * and 60,000), doubled per failure with ±20 % jitter, without a limit on the tries.
   */
  retry?: { baseMs: number; maxMs: number };
  /**
   * Connects the session of instance `instanceId` when the store still says it should be connected and logged in;
   * `listed` is the instance as {@link SessionRestorer.restoreAll} listed it, with the count of stops taken before
   * the list was read ({@link SessionManager.restore}).
   * @returns whether it did. @throws what connecting throws (503 when unreachable).
   */
  connect: (instanceId: string, listed?: ListedInstance) => Promise<boolean>;
  /** The count of disconnects and logouts this process has committed ({@link SessionManager.stops}). */
  stops: () => number;
  /** True when this process holds a connected session of `instanceId`. */
  connected: (instanceId: string) => boolean;
  /** True when this process holds a session of `instanceId`, connected or not. */
  kept: (instanceId: string) => boolean;
}

/**
 * Restores sessions at boot (docs/decisions/0016-session-lifecycle.md: a restart needs no new scan): every instance
 * the user left connected and logged in is connected again, and one the platform or the store did not answer for
 * ({@link restoreRetried}) is retried in the background with backoff, until it connects, the user acts on the
 * instance ({@link cancel}) or the process stops ({@link stop}); a list of instances the store did not answer is read
 * again the same way. Timers are unreferenced: a pending retry never keeps the process alive.
 */
export class SessionRestorer {
  readonly #options: SessionRestorerOptions;
  /** Pending retries by instance id. */
  readonly #retries = new Map<string, NodeJS.Timeout>();
  /**
   * Instances whose retry's timer fired and whose restore is under way, until it settles: between the timer and the
   * session's connect (the instance's turn, its row read) the instance still comes back by itself ({@link waiting}).
   */
  readonly #retrying = new Map<string, symbol>();
  /** The pending read again of the list of instances to restore (the store did not answer it), if any. */
  #listRetry: NodeJS.Timeout | undefined;
  /**
   * Instances whose restore failed and that the lease keeper restores again at its next round (several nodes,
   * {@link retriedByCaller}): they come back by themselves too, without a timer here.
   */
  readonly #retriedByCaller = new Set<string>();

  constructor(options: SessionRestorerOptions) {
    this.#options = options;
  }

  /**
   * Reconnects every instance to restore, `concurrency` at a time. Failures are logged per instance and do not stop
   * the others; an instance whose platform or store did not answer ({@link restoreRetried}) is retried in the
   * background. When the store does not answer the list itself, the list is read again in the background with the
   * same backoff, until it answers (the process never gives up on its store, docs/decisions/0011-store-faults.md);
   * meanwhile the instances have no session here and answer as coming back by themselves.
   * @returns how many instances were restored on the first try (0 when the list could not be read).
   * @throws the store's error when the list read failed with an error that trying again cannot fix.
   */
  async restoreAll(concurrency = 16): Promise<number> {
    try {
      return await this.#restoreListed(concurrency, false);
    } catch (error) {
      if (!isTransientStoreError(error)) throw error;
      this.#listFailed(error, concurrency, 1);
      return 0;
    }
  }

  /**
   * Reads the list of instances to restore and restores them, `concurrency` at a time; `again` (a read after the
   * first failed) leaves out the instances this process holds a session of: made since by a user's action or a
   * retry. @returns how many connected. @throws the store's error when the list cannot be read.
   */
  async #restoreListed(concurrency: number, again: boolean): Promise<number> {
    // Taken before the list is read: a restore trusts the listed row only if no stop was committed since.
    const stops = this.#options.stops();
    const listed = await listInstancesToRestore(this.#options.db);
    const instances = again ? listed.filter((instance) => !this.#options.kept(instance.id)) : listed;
    let restored = 0;
    let next = 0;
    const worker = async () => {
      while (next < instances.length) {
        const instance = instances[next++];
        if (!instance) break;
        if (await this.#restore(instance.id, 0, { instance, stops })) restored += 1;
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, instances.length) }, worker));
    return restored;
  }

  /**
   * The list of instances to restore could not be read (`error`, after `failures` tries): logs it and, for an error
   * trying again can fix, reads it again after the backoff of {@link SessionRestorerOptions.retry}.
   */
  #listFailed(error: unknown, concurrency: number, failures: number): void {
    const retry = isTransientStoreError(error);
    this.#options.logger.warn(
      { err: error, retry, failures },
      retry
        ? 'listing the sessions to restore failed: the store did not answer, will retry'
        : 'listing the sessions to restore failed',
    );
    if (!retry) return;
    clearTimeout(this.#listRetry);
    this.#listRetry = setTimeout(() => {
      this.#listRetry = undefined;
      this.#restoreListed(concurrency, true).catch((again: unknown) =>
        this.#listFailed(again, concurrency, failures + 1),
      );
    }, this.#delay(failures));
    this.#listRetry.unref();
  }

  /** Cancels the pending retry of `instanceId`, if any (the user acted on the instance, or it was released). */
  cancel(instanceId: string): void {
    clearTimeout(this.#retries.get(instanceId));
    this.#retries.delete(instanceId);
    this.#retrying.delete(instanceId);
    this.#retriedByCaller.delete(instanceId);
  }

  /** Cancels every pending retry, and the list's read again (shutdown). */
  stop(): void {
    clearTimeout(this.#listRetry);
    this.#listRetry = undefined;
    for (const timer of this.#retries.values()) clearTimeout(timer);
    this.#retries.clear();
    this.#retrying.clear();
    this.#retriedByCaller.clear();
  }

  /**
   * Notes that the restore of `instanceId` failed with `error` and that its caller, the lease keeper, restores it
   * again at its next round when {@link keeperRetries} (several nodes, docs/decisions/0008-leases-and-fencing.md):
   * it is then {@link waiting} until that restore starts ({@link retryStarted}), {@link cancel} or {@link stop}.
   * @returns whether it is retried.
   */
  retriedByCaller(instanceId: string, error: unknown): boolean {
    if (!keeperRetries(error)) {
      this.#retriedByCaller.delete(instanceId);
      return false;
    }
    this.#retriedByCaller.add(instanceId);
    return true;
  }

  /** A restore of `instanceId` is connecting: the retry {@link retriedByCaller} noted is under way. */
  retryStarted(instanceId: string): void {
    this.#retriedByCaller.delete(instanceId);
  }

  /**
   * True while a retry of `instanceId`'s restore is pending or under way (its timer fired, its restore not settled):
   * its session comes back by itself.
   */
  waiting(instanceId: string): boolean {
    return (
      this.#retries.has(instanceId) || this.#retrying.has(instanceId) || this.#retriedByCaller.has(instanceId)
    );
  }

  /** Number of instances waiting for a retry's timer or the lease keeper's next round (tests, metrics). */
  get pending(): number {
    return new Set([...this.#retries.keys(), ...this.#retriedByCaller]).size;
  }

  /**
   * Connects a restored instance (unless the store says it is no longer wanted connected); when the platform or the
   * store did not answer ({@link restoreRetried}) schedules the next try. @returns whether it connected.
   */
  async #restore(instanceId: string, failures: number, listed?: ListedInstance): Promise<boolean> {
    try {
      return await this.#options.connect(instanceId, listed);
    } catch (error) {
      const retry = restoreRetried(error);
      this.#options.logger.warn(
        { err: error, instanceId, retry },
        retry
          ? `restoring a session failed: ${retriedBecause(error)}, will retry`
          : 'restoring a session failed',
      );
      if (retry) this.#schedule(instanceId, failures + 1);
      return false;
    }
  }

  /** Restores `instanceId` again after the backoff of `failures` failures, unless it is connected by then. */
  #schedule(instanceId: string, failures: number): void {
    this.cancel(instanceId);
    const timer = setTimeout(() => {
      this.#retries.delete(instanceId);
      if (this.#options.connected(instanceId)) return;
      const mark = Symbol(instanceId);
      this.#retrying.set(instanceId, mark);
      void this.#restore(instanceId, failures).finally(() => {
        if (this.#retrying.get(instanceId) === mark) this.#retrying.delete(instanceId);
      });
    }, this.#delay(failures));
    timer.unref();
    this.#retries.set(instanceId, timer);
  }

  /** The wait after `failures` (≥ 1) failures in a row, ms: {@link SessionRestorerOptions.retry}'s backoff. */
  #delay(failures: number): number {
    const { baseMs, maxMs } = this.#options.retry ?? { baseMs: 1000, maxMs: 60_000 };
    return Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30)) * (0.8 + Math.random() * 0.4);
  }
}
