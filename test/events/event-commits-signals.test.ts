/**
 * The event streams' wake-up across nodes (docs/decisions/0078-store-signals.md): `EventCommits` tells the other
 * nodes, once per turn of the event loop, which instances committed, and wakes this node's listeners for the
 * instances they name, and every listener after a gap. The signals here are an in-memory stand-in; the PostgreSQL
 * ones are tested in test/store/pg-signals.test.ts and across three nodes in test/nodes/cluster-event-stream.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { EventCommits } from '../../src/events/event-commits.ts';
import type { SignalListener, SignalTopic, StoreSignals } from '../../src/store/pg-signals.ts';

/** Signals that keep what is published and let the test speak as another node. */
class MemorySignals implements StoreSignals {
  readonly published: { topic: SignalTopic; items: string[] }[] = [];
  readonly #listeners = new Map<SignalTopic, Set<SignalListener>>();
  readonly #gaps = new Set<() => void>();
  readonly listening = true;

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
  /** Another node published `items` on `topic`. */
  hear(topic: SignalTopic, items: string[]): void {
    for (const listener of this.#listeners.get(topic) ?? []) listener(items);
  }
  gap(): void {
    for (const listener of this.#gaps) listener();
  }
}

const event: EngineEvent = { type: 'contacts', contacts: [] };
const turnEnd = () => new Promise((resolve) => setImmediate(resolve));

describe('event commits with store signals', () => {
  it("publishes a turn's committed instances once, after the turn's commits", async () => {
    const commits = new EventCommits();
    const signals = new MemorySignals();
    commits.connect(signals);
    commits.afterCommit('i1', event);
    commits.afterCommit('i2', event);
    commits.afterCommit('i1', event);
    assert.deepEqual(signals.published, [], 'nothing before the turn ends');
    await turnEnd();
    assert.deepEqual(signals.published, [{ topic: 'events', items: ['i1', 'i2'] }]);
    commits.afterCommit('i3', event);
    await turnEnd();
    assert.deepEqual(signals.published.at(-1), { topic: 'events', items: ['i3'] });
    assert.equal(signals.published.length, 2);
  });

  it("wakes this node's listeners of the instances another node names, and every listener after a gap", () => {
    const commits = new EventCommits();
    const signals = new MemorySignals();
    commits.connect(signals);
    const woken: string[] = [];
    commits.subscribe('i1', () => woken.push('i1'));
    commits.subscribe('i2', () => woken.push('i2'));
    signals.hear('events', ['i2', 'i9']);
    assert.deepEqual(woken, ['i2']);
    signals.hear('keys', ['i1']);
    assert.deepEqual(woken, ['i2'], 'another topic wakes nothing');
    signals.gap();
    assert.deepEqual(woken.sort(), ['i1', 'i2', 'i2']);
    assert.deepEqual(signals.published, [], 'what it heard is not published again');
  });

  it('stops both ways once disconnected', async () => {
    const commits = new EventCommits();
    const signals = new MemorySignals();
    const disconnect = commits.connect(signals);
    const woken: string[] = [];
    commits.subscribe('i1', () => woken.push('i1'));
    disconnect();
    signals.hear('events', ['i1']);
    commits.afterCommit('i1', event);
    await turnEnd();
    assert.deepEqual(woken, ['i1'], 'only its own commit');
    assert.deepEqual(signals.published, []);
  });
});
