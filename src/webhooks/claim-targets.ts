import { performance } from 'node:perf_hooks';

/**
 * Most instances a claim looks at by name (docs/decisions/0053-targeted-claims.md); the others woken wait for the
 * next claim, in the order they were woken.
 */
export const TARGETED_CLAIM_MAX = 32;

/**
 * Which instances a delivery worker's next claim looks at (docs/decisions/0053-targeted-claims.md): every instance,
 * or only those woken since the last claim. Every instance at start, after a wake naming no instance, after a claim
 * that failed, after a claim over every instance that filled every free lane (more may be due), and once a poll
 * interval of real time (`performance.now()`) passed since the last claim over every instance: retries come due and
 * claims go stale without a wake, also while wakes keep the worker from sleeping until its poll.
 */
export class ClaimTargets {
  readonly #pollMs: number;
  /** Whether the next claim walks every instance. */
  #all = true;
  /** When the last claim over every instance started (`performance.now()`, ms). */
  #lastAll = Number.NEGATIVE_INFINITY;
  /** Instances whose events were queued (or whose lane batch ended) and not yet looked at, in the order woken. */
  readonly #woken = new Set<string>();

  /** `pollMs`: the worker's poll interval, ms; a claim over every instance starts at least this often. */
  constructor(pollMs: number) {
    this.#pollMs = pollMs;
  }

  /** The next claim walks every instance (a wake naming none, a claim that failed, `runOnce`). */
  everyInstance(): void {
    this.#all = true;
  }

  /** Notes that instance `instanceId` was woken: the next claim looks at it (or at every instance). */
  woken(instanceId: string): void {
    this.#woken.add(instanceId);
  }

  /**
   * Takes the targets of the claim starting now: `{ instances: undefined }` for every instance (the instances woken
   * are then forgotten: the claim looks at them too), else up to {@link TARGETED_CLAIM_MAX} of those woken, oldest
   * first, taken from the noted ones. `undefined` when there is nothing to look at (no claim is needed).
   */
  take(): { instances: string[] | undefined } | undefined {
    const started = performance.now();
    if (this.#all || started - this.#lastAll >= this.#pollMs) {
      this.#all = false;
      this.#lastAll = started;
      this.#woken.clear();
      return { instances: undefined };
    }
    const instances: string[] = [];
    for (const instanceId of this.#woken) {
      if (instances.length === TARGETED_CLAIM_MAX) break;
      instances.push(instanceId);
      this.#woken.delete(instanceId);
    }
    return instances.length === 0 ? undefined : { instances };
  }

  /**
   * A claim of `instances` (undefined: every instance) filled every free lane, or failed: more may be due than it
   * could take, so the next claim looks at the same instances again, or everywhere after a claim over every instance.
   */
  again(instances: readonly string[] | undefined): void {
    if (instances === undefined) this.#all = true;
    else for (const instanceId of instances) this.#woken.add(instanceId);
  }
}
