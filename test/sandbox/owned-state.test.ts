/**
 * The sandbox session's own state kept in memory (src/engines/sandbox/owned-state.ts, docs/decisions/0004-sandbox.md):
 * reads of the owned categories are answered from what was last read or written (absent entries included), other
 * categories always reach the store, a read that raced a write does not keep what it read, a failed write keeps
 * nothing, the entries are bounded, and clearing or forgetting empties it. Over an in-memory port that counts reads.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuthStateStore } from '../../src/engines/engine.ts';
import { OWNED_STATE_ENTRIES, OwnedAuthState } from '../../src/engines/sandbox/owned-state.ts';
import { SandboxWorld, USERS } from '../../src/engines/sandbox/world.ts';

/** An auth port in memory whose reads are counted and may be held until released. */
class MemoryPort implements AuthStateStore {
  readonly values = new Map<string, string>();
  reads: { category: string; ids: readonly string[] }[] = [];
  failNextSet = false;
  /** When set, reads wait for this promise before answering (with the values of the moment they began). */
  hold: Promise<void> | undefined;

  async get(category: string, ids: readonly string[]): Promise<Map<string, string>> {
    this.reads.push({ category, ids });
    const answer = new Map<string, string>();
    for (const id of ids) {
      const value = this.values.get(`${category}/${id}`);
      if (value !== undefined) answer.set(id, value);
    }
    await this.hold;
    return answer;
  }
  async set(entries: readonly { category: string; id: string; value: string | null }[]): Promise<void> {
    if (this.failNextSet) {
      this.failNextSet = false;
      throw new Error('store unavailable');
    }
    for (const { category, id, value } of entries) {
      if (value === null) this.values.delete(`${category}/${id}`);
      else this.values.set(`${category}/${id}`, value);
    }
  }
  async list(category: string): Promise<Map<string, string>> {
    const all = new Map<string, string>();
    for (const [key, value] of this.values)
      if (key.startsWith(`${category}/`)) all.set(key.slice(category.length + 1), value);
    return all;
  }
  async clear(): Promise<void> {
    this.values.clear();
  }
}

describe('the sandbox session’s own state', () => {
  it('reads an owned entry once, present or absent, and passes other categories through', async () => {
    const port = new MemoryPort();
    port.values.set('mine/a', '1');
    const owned = new OwnedAuthState(port, ['mine']);
    assert.deepEqual(await owned.get('mine', ['a', 'b']), new Map([['a', '1']]));
    assert.deepEqual(await owned.get('mine', ['a', 'b']), new Map([['a', '1']]));
    assert.deepEqual(port.reads, [{ category: 'mine', ids: ['a', 'b'] }]);
    // Only the entries not kept are read.
    assert.deepEqual(await owned.get('mine', ['a', 'c']), new Map([['a', '1']]));
    assert.deepEqual(port.reads.at(-1), { category: 'mine', ids: ['c'] });
    port.reads = [];
    await owned.get('other', ['x']);
    await owned.get('other', ['x']);
    assert.equal(port.reads.length, 2);
  });

  it('keeps what it wrote, deletions as absent, and nothing of a write that failed', async () => {
    const port = new MemoryPort();
    const owned = new OwnedAuthState(port, ['mine']);
    await owned.set([
      { category: 'mine', id: 'a', value: '2' },
      { category: 'mine', id: 'b', value: null },
      { category: 'other', id: 'x', value: '9' },
    ]);
    assert.equal(port.values.get('other/x'), '9');
    assert.deepEqual(await owned.get('mine', ['a', 'b']), new Map([['a', '2']]));
    assert.deepEqual(port.reads, []);

    port.failNextSet = true;
    await assert.rejects(owned.set([{ category: 'mine', id: 'a', value: '3' }]), /store unavailable/);
    assert.deepEqual(await owned.get('mine', ['a']), new Map([['a', '2']]), 'read again from the store');
    assert.deepEqual(port.reads, [{ category: 'mine', ids: ['a'] }]);
  });

  it('does not keep a read that was in flight while a write ran', async () => {
    const port = new MemoryPort();
    port.values.set('mine/a', 'old');
    const owned = new OwnedAuthState(port, ['mine']);
    let release = () => {};
    port.hold = new Promise((resolve) => {
      release = resolve;
    });
    const reading = owned.get('mine', ['a']);
    await owned.set([{ category: 'mine', id: 'a', value: 'new' }]);
    release();
    assert.deepEqual(await reading, new Map([['a', 'old']]), 'the read answers what it read');
    port.hold = undefined;
    port.reads = [];
    assert.deepEqual(await owned.get('mine', ['a']), new Map([['a', 'new']]));
    assert.deepEqual(port.reads, [], 'the written value was kept, the older read was not');
  });

  it(`keeps at most ${OWNED_STATE_ENTRIES} entries, the least recently used out first`, async () => {
    const port = new MemoryPort();
    const owned = new OwnedAuthState(port, ['mine']);
    const ids = Array.from({ length: OWNED_STATE_ENTRIES + 1 }, (_, k) => `id${k}`);
    await owned.get('mine', ['id0']);
    await owned.get('mine', ids.slice(1, OWNED_STATE_ENTRIES));
    await owned.get('mine', ['id0']); // id0 used again: id1 is now the least recent
    await owned.get('mine', [ids.at(-1) ?? '']);
    assert.equal(owned.size, OWNED_STATE_ENTRIES);
    port.reads = [];
    await owned.get('mine', ['id0']);
    assert.deepEqual(port.reads, []);
    await owned.get('mine', ['id1']);
    assert.deepEqual(port.reads, [{ category: 'mine', ids: ['id1'] }]);
  });

  it('forgets everything when cleared or forgotten', async () => {
    const port = new MemoryPort();
    const owned = new OwnedAuthState(port, ['mine']);
    await owned.set([{ category: 'mine', id: 'a', value: '1' }]);
    owned.forget();
    assert.equal(owned.size, 0);
    assert.deepEqual(await owned.get('mine', ['a']), new Map([['a', '1']]));
    await owned.clear();
    assert.equal(owned.size, 0);
    assert.deepEqual(await owned.get('mine', ['a']), new Map());
    assert.equal(port.reads.length, 2);
  });

  it('peeks at once only when every id asked is kept, absent ones left out', async () => {
    const port = new MemoryPort();
    port.values.set('mine/a', '1');
    const owned = new OwnedAuthState(port, ['mine']);
    assert.equal(owned.peek('mine', ['a']), undefined, 'nothing kept yet');
    await owned.get('mine', ['a', 'b']);
    assert.deepEqual(owned.peek('mine', ['a', 'b']), new Map([['a', '1']]));
    assert.equal(owned.peek('mine', ['a', 'c']), undefined, 'c is not kept');
    assert.equal(owned.peek('other', []), undefined, 'a category not kept');
    // A write under way is not peeked at: its entries are dropped until the store took it.
    const writing = owned.set([{ category: 'mine', id: 'a', value: '3' }]);
    assert.equal(owned.peek('mine', ['a']), undefined);
    await writing;
    assert.deepEqual(owned.peek('mine', ['a']), new Map([['a', '3']]));
  });

  it('the world answers users the session keeps before the turn ends, and reads the others at its end', async () => {
    const port = new MemoryPort();
    port.values.set(`${USERS}/5511977770002`, JSON.stringify({ registered: false }));
    const owned = new OwnedAuthState(port, [USERS]);
    const world = new SandboxWorld(owned, owned);
    const order: string[] = [];
    setImmediate(() => order.push('turn end'));
    const first = await world.users(['5511977770001', '5511977770002']);
    order.push('first read');
    assert.deepEqual(
      first.map((user) => user.registered),
      [true, false],
    );
    assert.equal(port.reads.length, 1);

    setImmediate(() => order.push('turn end'));
    const again = await world.users(['5511977770002', '5511977770001']);
    order.push('kept read');
    assert.deepEqual(
      again.map((user) => user.registered),
      [false, true],
    );
    assert.equal(port.reads.length, 1, 'no store read');
    assert.deepEqual(
      order,
      ['turn end', 'first read', 'kept read'],
      'the kept read did not wait for the turn',
    );
  });
});
