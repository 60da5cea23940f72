/**
 * The bounded map (src/domain/bounded-map.ts) the in-memory caches and recent-id lists are built on: it never holds
 * more than its bound, drops the oldest entry first, `set` makes its entry the newest (a held key moves), `use` does
 * the same without writing while `get`, `has` and iteration leave the order alone, evictions are told to `onEvict`
 * (deletions and clears are not), and a bound that is not a whole number of at least 1 is refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundedMap } from '../../src/domain/bounded-map.ts';

/** A map of bound `bound` holding `keys` (value = key upper-cased), set in that order. */
function filled(bound: number, ...keys: string[]): BoundedMap<string, string> {
  const map = new BoundedMap<string, string>(bound);
  for (const key of keys) map.set(key, key.toUpperCase());
  return map;
}

describe('BoundedMap', () => {
  it('is a Map, empty at first, and knows its bound', () => {
    const map = new BoundedMap<string, number>(3);
    assert.ok(map instanceof Map);
    assert.equal(map.size, 0);
    assert.equal(map.bound, 3);
  });

  it('never holds more than its bound, dropping the oldest set first', () => {
    const map = filled(3, 'a', 'b', 'c');
    assert.deepEqual([...map.keys()], ['a', 'b', 'c'], 'at the bound nothing is dropped');
    map.set('d', 'D');
    assert.deepEqual(
      [...map.entries()],
      [
        ['b', 'B'],
        ['c', 'C'],
        ['d', 'D'],
      ],
    );
    for (const key of ['e', 'f', 'g', 'h']) map.set(key, key);
    assert.equal(map.size, 3);
    assert.deepEqual([...map.keys()], ['f', 'g', 'h']);
  });

  it('keeps the entry just set even at a bound of 1', () => {
    const map = filled(1, 'a', 'b');
    assert.deepEqual([...map.entries()], [['b', 'B']]);
  });

  it('re-setting a held key moves it to the newest, with its new value, and drops nothing', () => {
    const map = filled(3, 'a', 'b', 'c');
    map.set('a', 'a2');
    assert.equal(map.size, 3);
    assert.deepEqual(
      [...map.entries()],
      [
        ['b', 'B'],
        ['c', 'C'],
        ['a', 'a2'],
      ],
    );
    map.set('d', 'D');
    assert.deepEqual([...map.keys()], ['c', 'a', 'd'], 'b, now the oldest, went first');
  });

  it('get, has and iteration leave the order alone: read with get it is first in, first out', () => {
    const map = filled(2, 'a', 'b');
    assert.equal(map.get('a'), 'A');
    assert.equal(map.has('a'), true);
    for (const _ of map) {
      // iterating reorders nothing
    }
    map.set('c', 'C');
    assert.deepEqual([...map.keys()], ['b', 'c'], 'a went first although it was read last');
  });

  it('use returns the value and makes the entry the newest: read with use it is least recently used', () => {
    const map = filled(2, 'a', 'b');
    assert.equal(map.use('a'), 'A');
    assert.deepEqual([...map.keys()], ['b', 'a']);
    map.set('c', 'C');
    assert.deepEqual([...map.keys()], ['a', 'c'], 'b, the least recently used, went first');
  });

  it('use of a key not held returns undefined and moves nothing', () => {
    const map = filled(2, 'a', 'b');
    assert.equal(map.use('z'), undefined);
    assert.equal(map.has('z'), false);
    assert.deepEqual([...map.keys()], ['a', 'b']);
  });

  it('use moves a key held with a null or undefined value', () => {
    const map = new BoundedMap<string, string | null | undefined>(3);
    map.set('none', null);
    map.set('unset', undefined);
    map.set('x', 'X');
    assert.equal(map.use('none'), null);
    assert.equal(map.use('unset'), undefined);
    assert.deepEqual([...map.keys()], ['x', 'none', 'unset']);
  });

  it('tells onEvict each entry the bound pushed out, after it left, but not deletions or clears', () => {
    const evicted: [string, number, boolean][] = [];
    const map: BoundedMap<string, number> = new BoundedMap<string, number>(2, {
      onEvict: (key, value) => evicted.push([key, value, map.has(key)]),
    });
    map.set('a', 1).set('b', 2);
    map.set('a', 10);
    assert.deepEqual(evicted, [], 're-setting a held key evicts nothing');
    map.set('c', 3);
    assert.deepEqual(evicted, [['b', 2, false]]);
    map.delete('a');
    map.set('d', 4);
    map.clear();
    assert.deepEqual(evicted, [['b', 2, false]], 'delete and clear are not evictions');
  });

  it('after delete or clear it fills up to its bound again', () => {
    const map = filled(2, 'a', 'b');
    map.delete('a');
    map.set('c', 'C');
    assert.deepEqual([...map.keys()], ['b', 'c'], 'the freed place was used; nothing dropped');
    map.clear();
    map.set('d', 'D').set('e', 'E');
    assert.deepEqual([...map.keys()], ['d', 'e']);
  });

  it('refuses a bound that is not a whole number of at least 1 with a RangeError', () => {
    for (const bound of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => new BoundedMap(bound), RangeError, `bound ${bound}`);
    }
  });
});
