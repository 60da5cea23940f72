import type { SignalListener, SignalTopic, StoreSignals } from '../../src/store/pg-signals.ts';

/**
 * Store signals in memory (src/store/pg-signals.ts `StoreSignals`): they keep what is published and let a test
 * speak as another node ({@link MemorySignals.hear}) or as a reconnection ({@link MemorySignals.gap}).
 */
export class MemorySignals implements StoreSignals {
  readonly published: { topic: SignalTopic; items: string[] }[] = [];
  readonly #listeners = new Map<SignalTopic, Set<SignalListener>>();
  readonly #gaps = new Set<() => void>();
  /** Whether the connection is up: a test sets it false to speak as a connection that went down. */
  listening = true;

  publish(topic: SignalTopic, items: readonly string[]): void {
    this.published.push({ topic, items: [...items] });
  }
  subscribe(topic: SignalTopic, listener: SignalListener): () => void {
    const set = this.#listeners.get(topic) ?? new Set();
    this.#listeners.set(topic, set);
    set.add(listener);
    return () => set.delete(listener);
  }
  onGap(listener: () => void): () => void {
    this.#gaps.add(listener);
    return () => this.#gaps.delete(listener);
  }
  async close(): Promise<void> {}
  /** Tells the subscribers of `topic` that another node published `items`. */
  hear(topic: SignalTopic, items: string[]): void {
    for (const listener of this.#listeners.get(topic) ?? []) listener(items);
  }
  /** Tells the gap listeners that signals may have been missed. */
  gap(): void {
    for (const listener of this.#gaps) listener();
  }
}
