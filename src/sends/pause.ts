import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/errors.ts';
import { GROUP_DOMAIN, STATUS_BROADCAST } from '../domain/messages.ts';
import type { PacingSettings, SendPause } from '../domain/sends.ts';
import type { Database } from '../store/schema.ts';
import type { SendJob } from '../store/send-jobs.ts';
import {
  chatHasHistory,
  countNewChatsSince,
  endNewChatLock,
  markNewChatsSince,
  oldestNewChatSince,
  readPacing,
  type StoredPacing,
  writeNewChatLock,
  writePacing,
  writePause,
} from '../store/send-pacing.ts';
import type { ReportedWrite, SendStatusReport } from './queue-deps.ts';

/** One rolling day, ms: the window of the new-chats-per-day pace. */
export const DAY_MS = 86_400_000;

/**
 * When the new-chats-per-day window no longer counts a relay that opened a chat at `sentAt` (epoch ms → epoch ms):
 * the window at `now` counts `sent_at ≥ now − DAY_MS` (src/store/send-pacing.ts `countNewChatsSince`), so it still
 * counts the relay at `sentAt + DAY_MS` and frees its slot 1 ms later (docs/decisions/0013-pacing.md): a send held
 * only to `sentAt + DAY_MS` would be claimed at that instant just to be held again.
 */
export function newChatSlotFreesAt(sentAt: number): number {
  return sentAt + DAY_MS + 1;
}

/** A reach-out timelock of an instance: until when (epoch ms) sends that open a chat wait, and why. */
export type NewChatLock = SendPause;

/** What a {@link PaceKeeper} needs. */
export interface PaceKeeperDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: FastifyBaseLogger;
  /**
   * Runs `write` in a transaction that records its `SessionStatus` reports with it (queue-deps.ts
   * `SendQueueDeps.recordWith`). @throws the write's or the store's error.
   */
  recordWith<T>(instanceId: string, write: ReportedWrite<T>): Promise<T>;
}

/**
 * The pace and the pauses of the instances whose send queue runs in this process (docs/decisions/0013-pacing.md):
 * the stored pace and pause, cached here while this process holds the instance (the holder is the only writer; read
 * again at each new hold and after a logout, which ends the account's pause and timelock in the store,
 * {@link PaceKeeper.forget}), the platform's reach-out timelock with them. Pausing and
 * resuming, and a timelock's start and end, write the store and record a `SessionStatus` `paused` / `resumed` in the
 * same transaction (docs/decisions/0076-status-with-its-write.md).
 */
export class PaceKeeper {
  readonly #deps: PaceKeeperDeps;
  readonly #pacing = new Map<string, StoredPacing>();
  /**
   * How many times each instance's cached pace was dropped ({@link drop}): a read begun before a drop (a write or a
   * new hold since) answers what it read but does not keep it, so the cache never holds a pace older than the last
   * one stored (docs/decisions/0013-pacing.md).
   */
  readonly #drops = new Map<string, number>();
  /**
   * Instances whose new-chats cap this process set where none was: the chats their relays opened before it are
   * flagged once more at the first check under the cap ({@link newChatCheck}), so a relay that was under way when the
   * cap was set counts too.
   */
  readonly #recount = new Set<string>();

  /** Cheap, no I/O. */
  constructor(deps: PaceKeeperDeps) {
    this.#deps = deps;
  }

  /** The instance's pace and pause (cached in this process). @throws the store's error. */
  async pacing(instanceId: string): Promise<StoredPacing> {
    const cached = this.#pacing.get(instanceId);
    if (cached) return cached;
    const drops = this.#drops.get(instanceId);
    const stored = await readPacing(this.#deps.db, instanceId);
    if (this.#drops.get(instanceId) === drops) this.#pacing.set(instanceId, stored);
    return stored;
  }

  /** Drops the instance's cached pace, and what a read under way would keep ({@link pacing}). */
  #drop(instanceId: string): void {
    this.#pacing.delete(instanceId);
    this.#drops.set(instanceId, (this.#drops.get(instanceId) ?? 0) + 1);
  }

  /**
   * Drops the cached pace and pause of the instance: the next read takes them from the store. Called at every new
   * hold on the instance (a committed login), since another node may have written them while it held the instance;
   * after a committed logout, whose transaction ended the account's pause and timelock (src/sends/logout.ts); and
   * before each read by a process holding no session of the instance (queue.ts `SendQueue.pacing`).
   */
  forget(instanceId: string): void {
    this.#drop(instanceId);
  }

  /**
   * Stores the instance's pace (the cache is read again next time). A new-chats cap set where none was counts the
   * chats opened in the last 24 h before it (docs/decisions/0013-pacing.md): the relays that opened one while no cap
   * asked are flagged first (store/send-pacing.ts `markNewChatsSince`, one statement), and once more at the first
   * check under the cap. @throws the store's error (a flag written before it stays true).
   */
  async setPacing(instanceId: string, pacing: PacingSettings): Promise<void> {
    const { db, clock } = this.#deps;
    const capped =
      pacing.newChatsPerDay !== null && (await this.pacing(instanceId)).pacing.newChatsPerDay === null;
    if (capped) await markNewChatsSince(db, instanceId, clock() - DAY_MS);
    await writePacing(db, instanceId, pacing, clock());
    this.#drop(instanceId);
    if (capped) this.#recount.add(instanceId);
    else if (pacing.newChatsPerDay === null) this.#recount.delete(instanceId);
  }

  /** The instance's pause in force at `now`, or null. */
  async pause(instanceId: string): Promise<SendPause | null> {
    const { pause } = await this.pacing(instanceId);
    return pause !== null && pause.until > this.#deps.clock() ? pause : null;
  }

  /**
   * The reach-out timelock in force for the instance, if any. One that ended is cleared from the store with its
   * `SessionStatus` `resumed` in one transaction (a clear again that finds it gone records nothing more).
   * @throws the store's error.
   */
  async newChatLock(instanceId: string): Promise<NewChatLock | undefined> {
    const { newChatLock: lock } = await this.pacing(instanceId);
    if (lock === null) return undefined;
    const now = this.#deps.clock();
    if (lock.until > now) return lock;
    const resumed: SendStatusReport = { kind: 'session', status: 'resumed', at: now };
    await this.#deps.recordWith(instanceId, async (db) => {
      const ended = await endNewChatLock(db, instanceId, now);
      return { result: ended, reports: ended ? [resumed] : [] };
    });
    this.#drop(instanceId);
    return undefined;
  }

  /**
   * The platform's reach-out timelock holds the instance's queued sends that open a chat until `lock.until` (existing
   * chats still work, docs/decisions/0013-pacing.md): stored, so a restart or another node holding the instance keeps
   * it, with its `SessionStatus` `paused` at `now` (epoch ms) in the same transaction; a write again that finds it
   * stored (its first answer lost) records nothing more. @throws the store's error.
   */
  async lockNewChats(instanceId: string, lock: NewChatLock, now: number): Promise<void> {
    const paused: SendStatusReport = {
      kind: 'session',
      status: 'paused',
      reason: lock.reason,
      until: lock.until,
      at: now,
    };
    await this.#deps.recordWith(instanceId, async (db) => {
      const written = await writeNewChatLock(db, instanceId, lock, now);
      return { result: written, reports: written ? [paused] : [] };
    });
    this.#drop(instanceId);
  }

  /**
   * Pauses the instance's queue until `pause.until` (stored and logged), its `SessionStatus` `paused` recorded in the
   * same transaction (docs/decisions/0076-status-with-its-write.md); a write again that finds the pause stored (its
   * first answer lost) records nothing more. @throws the store's error.
   */
  async startPause(instanceId: string, pause: SendPause): Promise<void> {
    const now = this.#deps.clock();
    const paused: SendStatusReport = {
      kind: 'session',
      status: 'paused',
      reason: pause.reason,
      until: pause.until,
      at: now,
    };
    const changed = await this.#deps.recordWith(instanceId, async (db) => {
      const written = await writePause(db, instanceId, pause, now);
      return { result: written, reports: written ? [paused] : [] };
    });
    this.#drop(instanceId);
    if (!changed) return;
    this.#deps.logger.warn(
      { instanceId, reason: pause.reason, until: new Date(pause.until).toISOString() },
      'the platform restricted sending: the send queue is paused',
    );
  }

  /**
   * Ends the instance's pause (stored and logged), its `SessionStatus` `resumed` recorded in the same transaction
   * (docs/decisions/0076-status-with-its-write.md); a write again that finds no pause records nothing more.
   * @throws the store's error.
   */
  async resume(instanceId: string): Promise<void> {
    const now = this.#deps.clock();
    const resumed: SendStatusReport = { kind: 'session', status: 'resumed', at: now };
    const changed = await this.#deps.recordWith(instanceId, async (db) => {
      const written = await writePause(db, instanceId, null, now);
      return { result: written, reports: written ? [resumed] : [] };
    });
    this.#drop(instanceId);
    if (changed) this.#deps.logger.info({ instanceId }, 'the send queue resumes');
  }

  /**
   * Whether relaying `job` opens a chat (a direct chat without history: docs/decisions/0013-pacing.md counts these per
   * day) and, when the pace or the reach-out timelock holds it back, the `rate_limited` error and the time (epoch ms)
   * it may run again: the timelock's end, or the first instant the rolling day no longer counts the oldest relay
   * that opened a chat ({@link newChatSlotFreesAt}; `forSlot` true: it waits for a slot of the cap). Only asks the
   * store when a new-chats pace or a timelock is in force; the count covers chats opened before the cap was set
   * ({@link setPacing}). @throws the store's error.
   */
  async newChatCheck(
    job: SendJob,
    pacing: PacingSettings,
  ): Promise<{ opensChat: boolean; hold?: { error: DomainError; until: number; forSlot: boolean } }> {
    const { db, clock } = this.#deps;
    // A group or a status (docs/decisions/0044-status-stories.md) never opens a chat.
    const isGroup = job.chat.endsWith(`@${GROUP_DOMAIN}`) || job.chat === STATUS_BROADCAST;
    const lock = await this.newChatLock(job.instanceId);
    const opensChat =
      (pacing.newChatsPerDay !== null || (lock !== undefined && job.mode === 'async')) &&
      !isGroup &&
      !(await chatHasHistory(db, job.instanceId, job.chat, job.id));
    if (opensChat && lock !== undefined && job.mode === 'async') {
      const error = new DomainError('rate_limited', lock.reason, {
        retryAfter: Math.max(1, Math.ceil((lock.until - clock()) / 1000)),
        restriction: 'reach-out-timelock',
      });
      return { opensChat, hold: { error, until: lock.until, forSlot: false } };
    }
    if (opensChat && pacing.newChatsPerDay !== null) {
      const since = clock() - DAY_MS;
      if (this.#recount.has(job.instanceId)) {
        await markNewChatsSince(db, job.instanceId, since);
        this.#recount.delete(job.instanceId);
      }
      // Counted up to the cap: the check needs no more (src/store/send-pacing.ts `countNewChatsSince`).
      const counted = await countNewChatsSince(db, job.instanceId, since, pacing.newChatsPerDay);
      if (counted >= pacing.newChatsPerDay) {
        const frees = newChatSlotFreesAt((await oldestNewChatSince(db, job.instanceId, since)) ?? clock());
        const error = new DomainError(
          'rate_limited',
          `the instance's pace allows ${pacing.newChatsPerDay} new chats per day; the next may open at ${new Date(frees).toISOString()}`,
          { retryAfter: Math.max(1, Math.ceil((frees - clock()) / 1000)) },
        );
        return { opensChat, hold: { error, until: frees, forSlot: true } };
      }
    }
    return { opensChat };
  }
}
