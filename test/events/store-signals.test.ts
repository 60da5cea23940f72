/**
 * Wake-ups across nodes (docs/decisions/0078-store-signals.md): `EventCommits` tells the other nodes, once per turn
 * of the event loop, which instances committed, and wakes this node's listeners for the instances they name, and
 * every listener after a gap; `LiveFeed` does the same for the delivery attempts of instances held by another node.
 * The signals here are an in-memory stand-in (test/support/memory-signals.ts); the PostgreSQL
 * ones are tested in test/store/pg-signals.test.ts and across three nodes in test/nodes/cluster-event-stream.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { EventCommits } from '../../src/events/event-commits.ts';
import { LiveFeed } from '../../src/events/live-feed.ts';
import { MemorySignals } from '../support/memory-signals.ts';

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

describe('live feed with store signals', () => {
  const change = (woken: string[], instanceId: string) => (kind: string) =>
    woken.push(`${instanceId}:${kind}`);

  it('tells the other nodes, once a turn, the attempts of instances held elsewhere, and only those', async () => {
    const feed = new LiveFeed();
    const signals = new MemorySignals();
    feed.connect(signals, (instanceId) => instanceId !== 'held-here');
    const woken: string[] = [];
    feed.subscribe('held-here', change(woken, 'held-here'));
    feed.attempted('held-here');
    feed.attempted('elsewhere');
    feed.attempted('elsewhere');
    feed.attempted('also-elsewhere');
    assert.deepEqual(woken, ['held-here:deliveries'], 'the local view is told at once');
    await turnEnd();
    assert.deepEqual(signals.published, [{ topic: 'deliveries', items: ['elsewhere', 'also-elsewhere'] }]);
  });

  it("wakes this node's views of the instances another node names, and every view after a gap", () => {
    const feed = new LiveFeed();
    const signals = new MemorySignals();
    feed.connect(signals, () => true);
    const woken: string[] = [];
    feed.subscribe('i1', change(woken, 'i1'));
    feed.subscribe('i2', change(woken, 'i2'));
    signals.hear('deliveries', ['i1', 'i7']);
    signals.hear('events', ['i2']);
    assert.deepEqual(woken, ['i1:deliveries']);
    signals.gap();
    assert.deepEqual(woken.sort(), ['i1:deliveries', 'i1:deliveries', 'i2:deliveries']);
    assert.deepEqual(signals.published, []);
  });
});
