import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { extended } from '../domain/objects.ts';
import type { PacingSettings, SendPause } from '../domain/sends.ts';
import type { SendQueue } from '../sends/queue.ts';

/** Longest interval or jitter a pace may set, ms: one hour. */
export const MAX_PACE_MS = 3_600_000;

/** An instance's pace and the pause in force (docs/decisions/0013-pacing.md). */
export interface PacingView extends PacingSettings {
  /** The restriction pause in force, or null. */
  paused: SendPause | null;
}

/**
 * Per-instance send pacing (docs/decisions/0013-pacing.md): `minIntervalMs` between two relays plus a random
 * `0..jitterMs`, and at most `newChatsPerDay` relays that open a chat per rolling 24 h. Off (0, 0, null) until set.
 */
export class PacingService {
  readonly #queue: SendQueue;

  constructor(deps: { queue: SendQueue }) {
    this.#queue = deps.queue;
  }

  /** The instance's pace and pause. @throws DomainError not_found `instance not found`. */
  async get(instance: Instance): Promise<PacingView> {
    const { pacing } = await this.#queue.pacing(instance.id);
    return extended(pacing, { paused: await this.#queue.pause(instance.id) });
  }

  /**
   * How many of the instance's sends are due and not relayed yet (queued, scheduled ones whose time came, synchronous
   * ones waiting their turn, one being relayed): the session status shows them
   * (docs/decisions/0016-session-lifecycle.md).
   * @throws the store's error.
   */
  pendingSends(instance: Instance): Promise<number> {
    return this.#queue.pendingSends(instance.id);
  }

  /**
   * Replaces the instance's pace; its queue is woken (a shorter interval may let a job go now).
   * @throws DomainError invalid naming the field when a value is negative, not whole, or over an hour;
   *   not_found `instance not found`.
   */
  async set(instance: Instance, pacing: PacingSettings): Promise<PacingView> {
    for (const field of ['minIntervalMs', 'jitterMs'] as const) {
      const value = pacing[field];
      if (!Number.isInteger(value) || value < 0 || value > MAX_PACE_MS) {
        throw errors.badRequest(`${field} must be a whole number of milliseconds from 0 to ${MAX_PACE_MS}`);
      }
    }
    if (
      pacing.newChatsPerDay !== null &&
      (!Number.isInteger(pacing.newChatsPerDay) || pacing.newChatsPerDay < 0)
    ) {
      throw errors.badRequest('newChatsPerDay must be a whole number ≥ 0, or null for no cap');
    }
    const stored = await this.#queue.setPacing(instance.id, pacing);
    return extended(stored.pacing, { paused: await this.#queue.pause(instance.id) });
  }
}
