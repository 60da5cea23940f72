import { type SignalTopic, type StoreSignals, TurnSignals } from '../store/pg-signals.ts';

/**
 * Listeners per instance for the in-process fan-outs that speak after a commit (the dashboard's live view,
 * src/events/live-feed.ts; the event streams' wake-up, src/events/event-commits.ts). An instance nobody listens to
 * holds nothing.
 */
export class InstanceListeners<A extends unknown[]> {
  readonly #byInstance = new Map<string, Set<(...args: A) => void>>();

  /** Calls `listener` on every {@link notify} of `instanceId` until the returned function is called. */
  subscribe(instanceId: string, listener: (...args: A) => void): () => void {
    let set = this.#byInstance.get(instanceId);
    if (!set) {
      set = new Set();
      this.#byInstance.set(instanceId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#byInstance.get(instanceId) === set) this.#byInstance.delete(instanceId);
    };
  }

  /**
   * Calls every listener of `instanceId` with `args`. A listener that throws (a closed stream) affects neither the
   * caller (the recorder) nor the other listeners.
   */
  notify(instanceId: string, ...args: A): void {
    for (const listener of this.#byInstance.get(instanceId) ?? []) {
      try {
        listener(...args);
      } catch {
        // Listeners must not throw; one that does is skipped.
      }
    }
  }

  /** Calls every listener of every instance with `args` (as {@link notify} does for one instance). */
  notifyAll(...args: A): void {
    for (const instanceId of [...this.#byInstance.keys()]) this.notify(instanceId, ...args);
  }

  /**
   * Joins these listeners to the other nodes' `topic` through `signals` (docs/decisions/0078-store-signals.md): each
   * instance another node names is notified with `args`, and every instance after a gap in the signals (signals may
   * have gone by unheard).
   * @returns `outgoing`, where this node notes the instances it tells the other nodes (once per turn of the event
   * loop), and `stop`, which ends both directions.
   */
  relay(signals: StoreSignals, topic: SignalTopic, ...args: A): { outgoing: TurnSignals; stop: () => void } {
    const unsubscribe = signals.subscribe(topic, (instanceIds) => {
      for (const instanceId of instanceIds) this.notify(instanceId, ...args);
    });
    const unwatch = signals.onGap(() => this.notifyAll(...args));
    return {
      outgoing: new TurnSignals(signals, topic),
      stop: () => {
        unsubscribe();
        unwatch();
      },
    };
  }

  /** How many listeners are subscribed, over every instance. */
  get count(): number {
    let count = 0;
    for (const set of this.#byInstance.values()) count += set.size;
    return count;
  }
}
