import { createHash, type Hash, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import { DomainError, type DomainErrorCode, errors } from '../domain/errors.ts';
import { extended } from '../domain/objects.ts';
import { PeriodicJob } from '../ops/periodic-job.ts';
import type { Store } from '../store/database.ts';
import { outcomeUnknown, untilStoreAnswers } from '../store/faults.ts';
import {
  type ClaimOutcome,
  claimIdempotencyKey,
  endIdempotencyClaim,
  type IdempotencyKeyId,
  type KeptAnswer,
  keepIdempotentAnswer,
  purgeExpiredIdempotencyKeys,
  releaseIdempotencyClaim,
  renewIdempotencyClaim,
} from '../store/idempotency.ts';

export type { KeptAnswer } from '../store/idempotency.ts';

/**
 * Idempotent `POST`s, Stripe's model (docs/decisions/0010-idempotency.md, docs/api.md "Idempotency"): a request
 * carrying `Idempotency-Key` claims the key in the store before it runs; its first answer below 500 is kept 24 h
 * and answered again to a retry of the same request; an answer of 500 or more is not kept: the key is released, or
 * its claim ended unfinished for the retry to continue as the same request.
 */

/** How long a kept answer (and the key) is remembered, ms: 24 h. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * How long a claim blocks the key without a renewal, ms: 60 s. The node running the request renews it every third
 * of that, so only a claim whose process died (or lost the store for a minute) can be taken over.
 */
export const IDEMPOTENCY_LOCK_MS = 60_000;
/**
 * Statuses below 500 that are not kept: refusals of the request's input (a 400 for a rule it breaks, a 413 for a
 * size past a limit, e.g. an image's pixels, found by the operation before it did anything) and a 429 "retry later".
 */
const NOT_KEPT = new Set([400, 413, 429]);
/**
 * Codes of a 5xx that decided the operation's failure: the platform refused it or could not be reached when it was
 * relayed, or the session was not ready to take it; nothing of the run goes out later, so a retry starts a new run.
 * Any other 5xx (`timeout`: the client left or the outcome is not known yet; `store_unavailable`; `internal`) may
 * leave work going on, which a retry continues (docs/decisions/0010-idempotency.md).
 */
const DECIDED_FAILURES: ReadonlySet<DomainErrorCode> = new Set([
  'platform_refused',
  'platform_unreachable',
  'not_ready',
]);
/** First wait before keeping an answer again after the store failed to take it, ms (doubling up to a third of the lock). */
const KEEP_RETRY_MS = 100;
/**
 * How long a claim whose first try lost its answer is tried again while the store cannot be reached, ms (real time):
 * the request waits that long at most before its 503.
 */
const CLAIM_AGAIN_MS = 5_000;
/** Longest key, characters. */
export const IDEMPOTENCY_KEY_MAX = 255;

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** Message of the 400 for a malformed header. */
export const BAD_KEY_MESSAGE = `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX} printable ASCII characters`;
/** Message of the 409 while the first request with the key runs. */
export const IN_PROGRESS_MESSAGE = 'a request with this Idempotency-Key is in progress';
/** Message of the 422 for a key reused with another request. */
export const REUSED_MESSAGE = 'Idempotency-Key reused with a different request';

/**
 * The key of a request's `Idempotency-Key` header value(s).
 * @returns the key: 1 to {@link IDEMPOTENCY_KEY_MAX} characters from space (0x20) to `~` (0x7E).
 * @throws DomainError invalid {@link BAD_KEY_MESSAGE} for anything else (empty, too long, control or non-ASCII
 *   characters, the header given twice).
 */
export function parseIdempotencyKey(value: string | string[]): string {
  if (typeof value !== 'string' || value.length > IDEMPOTENCY_KEY_MAX || !PRINTABLE_ASCII.test(value)) {
    throw errors.badRequest(BAD_KEY_MESSAGE);
  }
  return value;
}

/**
 * The fingerprint a retry must match: SHA-256 over the method, the path with its query (as the client sent it)
 * and the raw body bytes, fed as they arrive. Two requests match when all three are byte-identical.
 */
export class RequestFingerprint {
  readonly #hash: Hash;
  #digest: string | undefined;

  /**
   * @param method uppercase HTTP method; @param pathWithQuery the request target as received, e.g. `/v1/x?a=1`;
   * @param instance the `x-instance-id` header when the request has one: it names the instance the operation acts on
   *   (docs/decisions/0002-instance-resolution.md), so a request to another instance is another request.
   * @param allowList the instance allow-list of the request's API key (empty: every instance): a key limited to other
   *   instances makes another request, so it is never answered with what was done on an instance it may not address.
   */
  constructor(method: string, pathWithQuery: string, instance?: string, allowList: readonly string[] = []) {
    this.#hash = createHash('sha256');
    this.#hash.update(`${method}\n${pathWithQuery}\n`);
    if (instance !== undefined) this.#hash.update(`x-instance-id: ${instance}\n`);
    if (allowList.length > 0) this.#hash.update(`instances: ${[...allowList].sort().join(',')}\n`);
  }

  /** Adds body bytes, in order. Ignored once {@link digest} was read. */
  update(bytes: Buffer): void {
    if (this.#digest === undefined) this.#hash.update(bytes);
  }

  /** Lowercase hex SHA-256 of everything fed so far; the fingerprint is fixed from the first call on. */
  digest(): string {
    this.#digest ??= this.#hash.digest('hex');
    return this.#digest;
  }
}

/**
 * A claim held by the request running under a key; renewed until it is kept or released. `requestId` (a UUID) names
 * the request it continues: a retry that takes over an unfinished claim (of a process that died, or ended unfinished
 * by an answer that decided nothing; only a request with the same fingerprint does) keeps it, a new request (a new
 * row, an expired one, one released after a refusal) draws a new one. A send made under the claim is stored under a
 * message id that follows from it (src/http/routes/v1/messages-send.ts), so such a retry finds the message sent
 * before instead of sending a second one (docs/decisions/0010-idempotency.md).
 */
export interface IdempotencyClaim {
  readonly id: IdempotencyKeyId;
  readonly token: string;
  readonly requestId: string;
  /** True when `requestId` is an earlier run's: this run continues it, and what that run left may still go on. */
  readonly continued: boolean;
}

/** How a request with a key goes on: run (holding the claim), or answer the kept answer again. */
export type IdempotencyStart =
  | { kind: 'run'; claim: IdempotencyClaim }
  | { kind: 'replay'; answer: KeptAnswer };

/** Options of {@link IdempotencyService}; times in ms. */
export interface IdempotencyServiceOptions {
  store: Store;
  /**
   * The clock claims' locks and expiries are set and judged on: every node compares them, so a node passes its store
   * clock (docs/decisions/0008-leases-and-fencing.md, "One clock"; src/services.ts `idempotencyClock`).
   */
  clock: Clock;
  logger: FastifyBaseLogger;
  /** How long a kept answer is replayed (default {@link IDEMPOTENCY_TTL_MS}). */
  ttlMs?: number;
  /** How long an unrenewed claim blocks the key (default {@link IDEMPOTENCY_LOCK_MS}). */
  lockMs?: number;
}

/**
 * Claims, keeps and releases idempotency keys (see the module comment). The claim is a store row unique on
 * (organization, environment, key), so one request runs per key across every node; a claim is renewed on a timer
 * while its request runs.
 */
export class IdempotencyService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #logger: FastifyBaseLogger;
  readonly #ttlMs: number;
  readonly #lockMs: number;
  readonly #renewals = new Map<string, NodeJS.Timeout>();
  readonly #keepRetries = new Map<string, NodeJS.Timeout>();

  constructor(options: IdempotencyServiceOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#ttlMs = options.ttlMs ?? IDEMPOTENCY_TTL_MS;
    this.#lockMs = options.lockMs ?? IDEMPOTENCY_LOCK_MS;
  }

  /**
   * Claims `id` for a request with `fingerprint` (see {@link RequestFingerprint}), or finds the answer to replay.
   * A row that expired, or an unfinished claim past its lock made by a request with the same fingerprint, is taken
   * over; an unfinished claim of another fingerprint is refused as any reuse of the key is. A claim whose answer was
   * lost (the connection broke as its statement committed, `outcomeUnknown` in src/store/faults.ts) is made again at
   * once, waiting out an unreachable store for {@link CLAIM_AGAIN_MS}: the row it finds under this claim's own token
   * is this claim, so the key is not left "in progress" for a request that never ran
   * (docs/decisions/0011-store-faults.md).
   * @throws DomainError mismatch {@link REUSED_MESSAGE} (422) when the key's request had another fingerprint;
   *   conflict {@link IN_PROGRESS_MESSAGE} (409) while the first request still runs; the store's error.
   */
  async begin(id: IdempotencyKeyId, fingerprint: string): Promise<IdempotencyStart> {
    const now = this.#clock();
    const token = randomUUID();
    const input = extended(id, {
      fingerprint,
      token,
      requestId: randomUUID(),
      now,
      lockedUntil: now + this.#lockMs,
      expiresAt: now + this.#ttlMs,
    });
    const claimKey = () => claimIdempotencyKey(this.#store.db, input);
    let outcome: ClaimOutcome;
    try {
      outcome = await claimKey();
    } catch (error) {
      if (!outcomeUnknown(error)) throw error;
      outcome = await untilStoreAnswers(claimKey, Date.now, Date.now() + CLAIM_AGAIN_MS);
    }
    if (!outcome.claimed) {
      const { existing } = outcome;
      if (existing.fingerprint !== fingerprint) throw new DomainError('mismatch', REUSED_MESSAGE);
      if (existing.answer) return { kind: 'replay', answer: existing.answer };
      throw errors.conflict(IN_PROGRESS_MESSAGE);
    }
    const claim: IdempotencyClaim = {
      id: { ...id },
      token,
      requestId: outcome.requestId,
      continued: outcome.requestId !== input.requestId,
    };
    const timer = setInterval(() => this.#renew(claim), Math.max(1, Math.floor(this.#lockMs / 3)));
    timer.unref();
    this.#renewals.set(token, timer);
    return { kind: 'run', claim };
  }

  /**
   * Ends the claim with the request's answer (docs/decisions/0010-idempotency.md): below 500 it is kept for replay.
   * A 400 or 413 (the request breaks a rule or a size limit; the client fixes it and sends it again with the key),
   * a 429 (it says "retry
   * later") and a 5xx whose `failure` code decided the operation's failure ({@link DECIDED_FAILURES}) release the key:
   * a retry runs anew. Any other 5xx ends the claim unfinished ({@link release}): a retry runs again as the same
   * request and finds what this run left, so a send stored by it is answered, never sent a second time. A run that
   * continues an earlier one ({@link IdempotencyClaim.continued}) ends its claim unfinished for every answer not
   * kept, since the earlier run's work may still go on. An answer
   * that cannot be kept right now (the store failed) is kept later: the operation was carried out, so the key stays
   * claimed (renewed) and the keep is tried again until it succeeds, the claim is lost or the process stops.
   * @param failure the domain error code of an error answer made on this node (`internal` for an unexpected error);
   *   undefined for an answer relayed from another node, or an operation forwarded there, which decides nothing.
   * @throws the store's error when releasing or ending fails (the claim then ends at its lock).
   */
  async finish(claim: IdempotencyClaim, answer: KeptAnswer, failure?: DomainErrorCode): Promise<void> {
    const refused = NOT_KEPT.has(answer.status);
    if (!refused && answer.status < 500) return this.#keep(claim, answer, 0);
    // A run that continues an earlier one decides nothing about what that run left going on (a send's job may still
    // go out): the request is never forgotten then, whatever this run answered.
    const decided = refused || (failure !== undefined && DECIDED_FAILURES.has(failure));
    return decided && !claim.continued ? this.#forget(claim) : this.release(claim);
  }

  async #keep(claim: IdempotencyClaim, answer: KeptAnswer, attempt: number): Promise<void> {
    let kept: boolean;
    try {
      kept = await keepIdempotentAnswer(this.#store.db, claim.id, claim.token, answer);
    } catch (error) {
      if (!this.#renewals.has(claim.token)) return;
      this.#logger.warn(
        { err: error, key: claim.id.key },
        'keeping the answer of an idempotency key failed; retrying',
      );
      const delay = Math.min(KEEP_RETRY_MS * 2 ** attempt, Math.floor(this.#lockMs / 3));
      const timer = setTimeout(() => {
        this.#keepRetries.delete(claim.token);
        void this.#keep(claim, answer, attempt + 1);
      }, delay);
      timer.unref();
      this.#keepRetries.set(claim.token, timer);
      return;
    }
    this.#stopRenewal(claim);
    if (!kept) this.#logger.warn({ key: claim.id.key }, 'idempotency claim was taken over before its answer');
  }

  /**
   * Ends the claim without an answer and without forgetting its request (an answer that decided nothing, one that
   * cannot be kept, a response that never went out): the next request with the key and the same fingerprint runs at
   * once as the same request (its `requestId`), and finds what this run did (`endIdempotencyClaim`,
   * src/store/idempotency.ts).
   * @throws the store's error (the claim then ends at its lock, with the same effect).
   */
  async release(claim: IdempotencyClaim): Promise<void> {
    this.#stopRenewal(claim);
    await endIdempotencyClaim(this.#store.db, claim.id, claim.token, randomUUID());
  }

  /** Deletes the claim's row: the next request with the key is a new one (a new `requestId`). */
  async #forget(claim: IdempotencyClaim): Promise<void> {
    this.#stopRenewal(claim);
    await releaseIdempotencyClaim(this.#store.db, claim.id, claim.token);
  }

  /** Stops every renewal timer (process shutdown: unfinished claims then end at their lock). */
  close(): void {
    for (const timer of this.#renewals.values()) clearInterval(timer);
    this.#renewals.clear();
    for (const timer of this.#keepRetries.values()) clearTimeout(timer);
    this.#keepRetries.clear();
  }

  #stopRenewal(claim: IdempotencyClaim): void {
    clearInterval(this.#renewals.get(claim.token));
    this.#renewals.delete(claim.token);
  }

  #renew(claim: IdempotencyClaim): void {
    renewIdempotencyClaim(this.#store.db, claim.id, claim.token, this.#clock() + this.#lockMs)
      .then((held) => {
        if (!held) this.#stopRenewal(claim);
      })
      .catch((error: unknown) => this.#logger.warn({ err: error }, 'renewing an idempotency claim failed'));
  }
}

/** Options of the {@link IdempotencyPurge} job; times in ms. */
export interface IdempotencyPurgeOptions {
  store: Store;
  clock: Clock;
  logger: FastifyBaseLogger;
  /** How often the job runs (default one hour; the first run is at start). */
  intervalMs?: number;
  /** Rows deleted per statement, about (default 1,000), so a large backlog never holds a long lock. */
  batch?: number;
}

/**
 * Deletes idempotency keys past their 24 h (expired rows are already ignored by claims; this keeps the table
 * small). Runs in every process; deletions are idempotent.
 */
export class IdempotencyPurge extends PeriodicJob {
  readonly #options: IdempotencyPurgeOptions;

  constructor(options: IdempotencyPurgeOptions) {
    super({
      logger: options.logger,
      ...(options.intervalMs === undefined ? {} : { intervalMs: options.intervalMs }),
      failure: 'purging expired idempotency keys failed',
    });
    this.#options = options;
  }

  /** Deletes every expired key, batch by batch. @returns how many rows were deleted. */
  override async runOnce(): Promise<number> {
    const { store, clock, logger } = this.#options;
    const batch = this.#options.batch ?? 1000;
    const now = clock();
    let total = 0;
    let more = true;
    while (more) {
      const deleted = await purgeExpiredIdempotencyKeys(store.db, now, batch);
      total += deleted;
      more = deleted >= batch && (await this.nextBatch());
    }
    if (total > 0) logger.info({ deleted: total }, 'purged expired idempotency keys');
    return total;
  }
}
