import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type GroupWriter, TurnGroup } from '../../src/ops/turn-group.ts';

/**
 * A writer that logs each call: `together` with the items it got, `alone` with its one item. Items in `bad` fail
 * (a group holding one fails as a whole, as a rolled-back transaction would); `unreachable` fails every call.
 */
class LogWriter implements GroupWriter<number, string> {
  readonly calls: { kind: 'together' | 'alone'; items: number[] }[] = [];
  readonly bad = new Set<number>();
  unreachable = false;
  /** Set to hold the next `together` call until it is resolved. */
  hold: Promise<void> | undefined;

  async together(items: readonly number[]): Promise<string[]> {
    this.calls.push({ kind: 'together', items: [...items] });
    const hold = this.hold;
    this.hold = undefined;
    if (hold !== undefined) await hold;
    if (this.unreachable) throw new Error('store unreachable');
    const bad = items.find((item) => this.bad.has(item));
    if (bad !== undefined) throw new Error(`item ${bad} refused`);
    return items.map((item) => `written ${item}`);
  }

  async alone(item: number): Promise<string> {
    this.calls.push({ kind: 'alone', items: [item] });
    if (this.unreachable) throw new Error('store unreachable');
    if (this.bad.has(item)) throw new Error(`item ${item} refused`);
    return `written ${item}`;
  }

  failsEach(error: unknown): boolean {
    return error instanceof Error && error.message === 'store unreachable';
  }
}

/** Group commit over a turn of the event loop (src/ops/turn-group.ts, docs/decisions/0051-turn-groups.md). */
describe('TurnGroup', () => {
  it('writes the items of one turn in one call, in order, and gives each caller its own result', async () => {
    const writer = new LogWriter();
    const group = new TurnGroup(writer, 10);
    const results = await Promise.all([1, 2, 3].map((item) => group.add(item)));
    assert.deepEqual(results, ['written 1', 'written 2', 'written 3']);
    assert.deepEqual(writer.calls, [{ kind: 'together', items: [1, 2, 3] }]);
  });

  it('writes a lone item alone', async () => {
    const writer = new LogWriter();
    const group = new TurnGroup(writer, 10);
    assert.equal(await group.add(7), 'written 7');
    assert.deepEqual(writer.calls, [{ kind: 'alone', items: [7] }]);
  });

  it('splits a turn into groups of at most `max` items, one group after the other', async () => {
    const writer = new LogWriter();
    const group = new TurnGroup(writer, 2);
    const results = await Promise.all([1, 2, 3, 4, 5].map((item) => group.add(item)));
    assert.deepEqual(results, ['written 1', 'written 2', 'written 3', 'written 4', 'written 5']);
    assert.deepEqual(writer.calls, [
      { kind: 'together', items: [1, 2] },
      { kind: 'together', items: [3, 4] },
      { kind: 'alone', items: [5] },
    ]);
  });

  it('counts each item by its weight: a group takes items while they fit, and always at least one', async () => {
    const writer = new LogWriter();
    const group = new TurnGroup(writer, 5);
    const added = [
      [1, 3],
      [2, 2],
      [3, 1],
      [4, 9],
      [5, 1],
    ] as const;
    await Promise.all(added.map(([item, weight]) => group.add(item, weight)));
    assert.deepEqual(writer.calls, [
      { kind: 'together', items: [1, 2] },
      { kind: 'alone', items: [3] },
      { kind: 'alone', items: [4] },
      { kind: 'alone', items: [5] },
    ]);
  });

  it('a writer that throws instead of rejecting still settles its callers', async () => {
    const group = new TurnGroup<number, string>(
      {
        together: () => {
          throw new Error('thrown by together');
        },
        alone: (item) => {
          if (item === 2) throw new Error('thrown by alone');
          return Promise.resolve(`written ${item}`);
        },
      },
      10,
    );
    const outcomes = await Promise.allSettled([1, 2].map((item) => group.add(item)));
    assert.deepEqual(
      outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : String(outcome.reason))),
      ['written 1', 'Error: thrown by alone'],
    );
  });

  it('items added while a group is written wait for it and form the next group', async () => {
    const writer = new LogWriter();
    const group = new TurnGroup(writer, 10);
    let release: () => void = () => undefined;
    writer.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const first = Promise.all([1, 2].map((item) => group.add(item)));
    // Wait until the first group is being written, then add more while it is held.
    while (writer.calls.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const order: string[] = [];
    const second = Promise.all([3, 4].map((item) => group.add(item))).then((r) => {
      order.push('second');
      return r;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(writer.calls.length, 1, 'the second group waits for the first');
    release();
    const firstResults = await first.then((r) => {
      order.push('first');
      return r;
    });
    assert.deepEqual(firstResults, ['written 1', 'written 2']);
    assert.deepEqual(await second, ['written 3', 'written 4']);
    assert.deepEqual(order, ['first', 'second']);
    assert.deepEqual(writer.calls, [
      { kind: 'together', items: [1, 2] },
      { kind: 'together', items: [3, 4] },
    ]);
  });

  it('a failed group is written again one item at a time: a bad item fails only its own caller', async () => {
    const writer = new LogWriter();
    writer.bad.add(2);
    const group = new TurnGroup(writer, 10);
    const outcomes = await Promise.allSettled([1, 2, 3].map((item) => group.add(item)));
    assert.deepEqual(
      outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : String(outcome.reason))),
      ['written 1', 'Error: item 2 refused', 'written 3'],
    );
    assert.deepEqual(writer.calls, [
      { kind: 'together', items: [1, 2, 3] },
      { kind: 'alone', items: [1] },
      { kind: 'alone', items: [2] },
      { kind: 'alone', items: [3] },
    ]);
  });

  it('an error that would fail each item alike fails every caller at once, without a second try', async () => {
    const writer = new LogWriter();
    writer.unreachable = true;
    const group = new TurnGroup(writer, 10);
    const outcomes = await Promise.allSettled([1, 2].map((item) => group.add(item)));
    assert.deepEqual(
      outcomes.map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : outcome.value)),
      ['Error: store unreachable', 'Error: store unreachable'],
    );
    assert.deepEqual(writer.calls, [{ kind: 'together', items: [1, 2] }]);
    // The group goes on: the next turn's items are written once the store is back.
    writer.unreachable = false;
    assert.equal(await group.add(3), 'written 3');
  });
});
