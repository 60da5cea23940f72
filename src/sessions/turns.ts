/**
 * One queue per instance for the session lifecycle steps that must not interleave in this process (a disconnect, a
 * logout, a restore: docs/decisions/0016-session-lifecycle.md); across nodes the instance's lease keeps its session on
 * one node (docs/decisions/0008-leases-and-fencing.md). A step starts once every earlier step of its instance has
 * settled, whether it resolved or rejected; an instance's entry goes once its last step settled, so an idle instance
 * holds nothing.
 */
export class InstanceTurns {
  /** Per instance, the settling of the last step queued. */
  readonly #last = new Map<string, Promise<void>>();

  /**
   * Runs `step` once every earlier step of `instanceId` given here has settled.
   * @returns what `step` returns. @throws what `step` throws (the next step runs all the same).
   */
  run<T>(instanceId: string, step: () => Promise<T>): Promise<T> {
    const before = this.#last.get(instanceId) ?? Promise.resolve();
    const result = before.then(step);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    this.#last.set(instanceId, settled);
    void settled.then(() => {
      if (this.#last.get(instanceId) === settled) this.#last.delete(instanceId);
    });
    return result;
  }

  /** How many instances have a step queued or running (tests). */
  get size(): number {
    return this.#last.size;
  }
}
