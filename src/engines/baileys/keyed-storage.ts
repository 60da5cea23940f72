import asyncHooks from 'node:async_hooks';
import { syncBuiltinESMExports } from 'node:module';

/**
 * One `AsyncLocalStorage` for every Baileys socket of the process, instead of one each.
 *
 * Why: Baileys 7 (`addTransactionCapability`, called once per `makeWASocket`) creates an `AsyncLocalStorage` per
 * socket for its Signal key transactions, enables it on the first transaction and never disables it (Baileys issue
 * #2806). On Node.js before 24 every enabled storage is walked, and stamps a property, on every promise and timer
 * the process creates afterwards, so each promise costs O(sockets ever opened): with 400 such storages (200
 * sessions, each relinked once) a database query through Kysely measured 30× slower than with none, and the cost
 * grows with every reconnect for the life of the process. The storage Baileys holds is replaced, while its socket is
 * created, by a {@link KeyedAsyncLocalStorage}: all of them share one real storage whose value maps each keyed
 * storage to its own context, so the process pays for one storage however many sockets it opens, and each socket
 * still sees only its own transaction (the isolation Baileys relies on).
 */

/** The one real storage behind every {@link KeyedAsyncLocalStorage}: keyed storage → its context. */
const shared = new asyncHooks.AsyncLocalStorage<ReadonlyMap<KeyedAsyncLocalStorage<unknown>, unknown>>();

/**
 * The part of Node's `AsyncLocalStorage` API that Baileys uses (`run`, `getStore`), with `exit`, `enterWith` and
 * `disable` for completeness, on the process-wide shared storage. Contexts of different keyed storages nest
 * without seeing each other: `getStore()` answers only what this storage's own `run` set in the current
 * asynchronous context.
 */
export class KeyedAsyncLocalStorage<T> {
  /** Runs `fn(...args)` with `store` as this storage's context (and every other storage's unchanged); → its result. */
  run<R, A extends unknown[]>(store: T, fn: (...args: A) => R, ...args: A): R {
    const next = new Map(shared.getStore());
    next.set(this, store);
    return shared.run(next, fn, ...args);
  }

  /** This storage's context in the current asynchronous context; undefined outside a `run`. */
  getStore(): T | undefined {
    return shared.getStore()?.get(this) as T | undefined;
  }

  /** Runs `fn(...args)` outside this storage's context (other storages' contexts kept); → its result. */
  exit<R, A extends unknown[]>(fn: (...args: A) => R, ...args: A): R {
    const current = shared.getStore();
    if (!current?.has(this)) return fn(...args);
    const next = new Map(current);
    next.delete(this);
    return shared.run(next, fn, ...args);
  }

  /** Sets this storage's context for the rest of the current synchronous execution and what it schedules. */
  enterWith(store: T): void {
    const next = new Map(shared.getStore());
    next.set(this, store);
    shared.enterWith(next);
  }

  /** Nothing to release: a keyed storage holds no slot of its own in Node's list of enabled storages. */
  disable(): void {}
}

/** The writable exports object of `node:async_hooks` (what `require('node:async_hooks')` returns). */
const hooksExports = asyncHooks as { AsyncLocalStorage: unknown };

/**
 * Runs the synchronous `create` (Baileys' `makeWASocket`) with `AsyncLocalStorage` from `node:async_hooks`
 * standing for {@link KeyedAsyncLocalStorage}, ESM named imports included (`syncBuiltinESMExports`), and puts the
 * real class back before returning, so only storages created inside `create` are keyed; → what `create` returned.
 * @throws whatever `create` throws (the real class is restored first).
 */
export function withKeyedStorages<R>(create: () => R): R {
  const original = hooksExports.AsyncLocalStorage;
  hooksExports.AsyncLocalStorage = KeyedAsyncLocalStorage;
  syncBuiltinESMExports();
  try {
    return create();
  } finally {
    hooksExports.AsyncLocalStorage = original;
    syncBuiltinESMExports();
  }
}
