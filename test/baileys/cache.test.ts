import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { makeCacheableSignalKeyStore, type SignalDataSet, type SignalKeyStore } from 'baileys';
import { BoundedCache } from '../../src/engines/baileys/cache.ts';
import { keepsSignalKey, SessionCaches } from '../../src/engines/baileys/session-options.ts';

/** A key store in memory that counts the ids each `get` asked for. */
function countingStore(): { store: SignalKeyStore; asked: string[] } {
  const data = new Map<string, unknown>();
  const asked: string[] = [];
  const store: SignalKeyStore = {
    async get(type, ids) {
      const out: Record<string, never> = {};
      for (const id of ids) {
        asked.push(`${type}.${id}`);
        const value = data.get(`${type}.${id}`);
        if (value !== undefined) out[id] = value as never;
      }
      return out;
    },
    async set(update: SignalDataSet) {
      for (const [type, entries] of Object.entries(update)) {
        for (const [id, value] of Object.entries(entries ?? {})) {
          if (value === null || value === undefined) data.delete(`${type}.${id}`);
          else data.set(`${type}.${id}`, value);
        }
      }
    },
  };
  return { store, asked };
}

/** Bounded caches of the live engine (docs/decisions/0025-live-engine.md: bounded memory). */
describe('bounded caches', () => {
  it('drops the entries that outlived their TTL as newer ones are written, oldest first', () => {
    let now = 1_000;
    const cache = new BoundedCache(100, 10, () => now);
    cache.set('a', 1);
    now += 50;
    cache.set('b', 2);
    now += 60;
    // 'a' expired at 1,100 and is swept by this write; 'b' (expires 1,150) stays.
    cache.set('c', 3);
    assert.equal(cache.size, 2);
    assert.equal(cache.get('b'), 2);
    assert.equal(cache.get('c'), 3);
    now += 200;
    cache.set('d', 4);
    assert.equal(cache.size, 1);
    assert.equal(cache.get('d'), 4);
  });

  it('drops the least recently written entry beyond its cap', () => {
    const cache = new BoundedCache(Number.POSITIVE_INFINITY, 2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 3);
    cache.set('c', 4);
    assert.equal(cache.get('b'), undefined);
    assert.deepEqual([cache.get('a'), cache.get('c'), cache.size], [3, 4, 2]);
  });

  it('keeps only the keys its predicate keeps; a refused write forgets what was kept under the key', () => {
    const cache = new BoundedCache(60_000, 10, Date.now, (key) => key !== 'x');
    cache.set('y', 1);
    cache.set('x', 2);
    assert.equal(cache.get('x'), undefined);
    assert.equal(cache.size, 1);
  });

  it('the signal-key cache keeps session keys but no pre-keys; a pre-key is read from the store', async () => {
    assert.equal(keepsSignalKey('pre-key.17'), false);
    assert.equal(keepsSignalKey('session.5511988887777.0'), true);
    const caches = new SessionCaches(Date.now);
    const { store, asked } = countingStore();
    const keys = makeCacheableSignalKeyStore(store, undefined, caches.keyCache);
    const pair = { public: new Uint8Array(32).fill(1), private: new Uint8Array(32).fill(2) };
    const preKeys = Object.fromEntries(Array.from({ length: 812 }, (_, i) => [String(i + 1), pair]));
    await keys.set({ 'pre-key': preKeys, session: { '5511988887777.0': new Uint8Array(16) } });
    assert.equal(caches.keyCache.size, 1, 'the session kept, no pre-key');
    assert.deepEqual(Object.keys(await keys.get('session', ['5511988887777.0'])), ['5511988887777.0']);
    assert.deepEqual(await keys.get('pre-key', ['17']), { '17': pair });
    assert.deepEqual(asked, ['pre-key.17'], 'the session answered by the cache, the pre-key by the store');
  });
});
