import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, it } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { addTransactionCapability, type SignalDataTypeMap, type SignalKeyStore } from 'baileys';
import pino from 'pino';
import { KeyedAsyncLocalStorage, withKeyedStorages } from '../../src/engines/baileys/keyed-storage.ts';

/**
 * The keyed storages standing in for Baileys' per-socket AsyncLocalStorage: each sees only its own context across
 * awaits and nesting, the real class is back once the socket is made, and Baileys' own key transactions (the code
 * that creates the storage) still commit their writes once, to their own store.
 */

describe('keyed async local storage', () => {
  it('keeps each storage context to itself across awaits and nesting', async () => {
    const a = new KeyedAsyncLocalStorage<string>();
    const b = new KeyedAsyncLocalStorage<string>();
    assert.equal(a.getStore(), undefined);
    const seen = await a.run('a1', async () => {
      await tick();
      const inner = await b.run('b1', async () => {
        await tick();
        return [a.getStore(), b.getStore(), a.exit(() => a.getStore()), a.exit(() => b.getStore())];
      });
      return [...inner, a.getStore(), b.getStore()];
    });
    assert.deepEqual(seen, ['a1', 'b1', undefined, 'b1', 'a1', undefined]);
    // Two runs of the same storage at once each keep their own context.
    const both = await Promise.all(
      ['x', 'y'].map((value) =>
        a.run(value, async () => {
          await tick();
          return a.getStore();
        }),
      ),
    );
    assert.deepEqual(both, ['x', 'y']);
    assert.equal(a.getStore(), undefined);
  });

  it('stands in for AsyncLocalStorage only while the socket is created', () => {
    const made = withKeyedStorages(() => new AsyncLocalStorage());
    assert.ok(made instanceof KeyedAsyncLocalStorage, 'an ESM named import sees the keyed class inside');
    assert.ok(new AsyncLocalStorage() instanceof AsyncLocalStorage, 'the real class is back after');
    assert.throws(() =>
      withKeyedStorages(() => {
        throw new Error('socket failed');
      }),
    );
    assert.ok(!(new AsyncLocalStorage() instanceof KeyedAsyncLocalStorage), 'restored after a throw too');
  });

  it("keeps Baileys' key transactions working and isolated per socket", async () => {
    const logger = pino({ level: 'silent' });
    const stores = [new Map<string, unknown>(), new Map<string, unknown>()];
    const writes: string[][] = [[], []];
    const keyStore = (i: number): SignalKeyStore => ({
      async get(type, ids) {
        const out: { [id: string]: SignalDataTypeMap[typeof type] } = {};
        for (const id of ids) {
          const value = stores[i]?.get(`${type}:${id}`);
          if (value !== undefined) out[id] = value as SignalDataTypeMap[typeof type];
        }
        return out;
      },
      async set(data) {
        for (const [type, entries] of Object.entries(data)) {
          for (const [id, value] of Object.entries(entries ?? {})) {
            writes[i]?.push(`${type}:${id}`);
            stores[i]?.set(`${type}:${id}`, value);
          }
        }
      },
    });
    const options = { maxCommitRetries: 1, delayBetweenTriesMs: 1 };
    const [first, second] = [0, 1].map((i) =>
      withKeyedStorages(() => addTransactionCapability(keyStore(i), logger, options)),
    );
    assert.ok(first && second);
    const session = new Uint8Array([1, 2, 3]);
    await first.transaction(async () => {
      await first.set({ session: { alice: session } });
      // Inside the first socket's transaction the write is held back; the second socket is outside any.
      assert.deepEqual(writes, [[], []]);
      await second.set({ session: { bob: session } });
      assert.deepEqual(
        writes[1],
        ['session:bob'],
        "the second socket wrote at once: not in the first's transaction",
      );
      assert.deepEqual(
        await first.get('session', ['alice']),
        { alice: session },
        'read from the transaction',
      );
    }, 'alice');
    assert.deepEqual(writes, [['session:alice'], ['session:bob']]);
    assert.equal(stores[0]?.has('session:bob'), false);
    assert.equal(stores[1]?.has('session:alice'), false);
  });
});
