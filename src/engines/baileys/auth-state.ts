import {
  type AuthenticationCreds,
  type AuthenticationState,
  BufferJSON,
  type CacheStore,
  initAuthCreds,
  makeCacheableSignalKeyStore,
  proto,
  type SignalDataSet,
  type SignalDataTypeMap,
  type SignalKeyStore,
} from 'baileys';
import type { AuthStateStore } from '../engine.ts';
import type { BaileysLogger } from './socket.ts';

/** Category of the credentials document in the auth store. */
export const CREDS_CATEGORY = 'creds';
/** Id of the credentials document within {@link CREDS_CATEGORY}. */
export const CREDS_ID = 'creds';

/**
 * Every key type Baileys 7 reads or writes through `SignalKeyStore` (`SignalDataTypeMap`), each stored as its own
 * auth-store category. `lid-mapping`, `device-list`, `tctoken` and `identity-key` are new in Baileys 7.
 */
export const SIGNAL_KEY_TYPES = [
  'pre-key',
  'session',
  'sender-key',
  'sender-key-memory',
  'app-state-sync-key',
  'app-state-sync-version',
  'lid-mapping',
  'device-list',
  'tctoken',
  'identity-key',
] as const satisfies readonly (keyof SignalDataTypeMap)[];

/** How many ids one read asks the store for (keeps `IN (…)` lists small on both dialects). */
const READ_CHUNK = 500;

/** Serialises a Baileys value for the store: JSON with Buffers/Uint8Arrays as `{type:'Buffer',data:<base64>}`. */
export function encodeAuthValue(value: unknown): string {
  return JSON.stringify(value, BufferJSON.replacer);
}

/** Inverse of {@link encodeAuthValue} (Baileys' `BufferJSON.reviver` restores the Buffers). */
export function decodeAuthValue(text: string): unknown {
  return JSON.parse(text, BufferJSON.reviver);
}

/**
 * A Baileys `SignalKeyStore` over parley's sealed auth store (docs/decisions/0025-live-engine.md;
 * docs/decisions/0020-security-promises.md encrypts each value): one category per key type, the key id as id. One
 * `set()` call is one store transaction (Baileys' transaction layer batches a whole signal operation into one
 * `set()`); a null value deletes. `app-state-sync-key` values are turned back into
 * `proto.Message.AppStateSyncKeyData`, as Baileys' own file store does.
 */
export function makeSqlKeyStore(store: AuthStateStore): SignalKeyStore {
  return {
    async get<T extends keyof SignalDataTypeMap>(type: T, ids: string[]) {
      const out: { [id: string]: SignalDataTypeMap[T] } = {};
      for (let i = 0; i < ids.length; i += READ_CHUNK) {
        const found = await store.get(type, ids.slice(i, i + READ_CHUNK));
        for (const [id, text] of found) {
          let value = decodeAuthValue(text);
          if (type === 'app-state-sync-key' && value && typeof value === 'object') {
            value = proto.Message.AppStateSyncKeyData.fromObject(value as Record<string, unknown>);
          }
          out[id] = value as SignalDataTypeMap[T];
        }
      }
      return out;
    },
    async set(data: SignalDataSet) {
      const entries: { category: string; id: string; value: string | null }[] = [];
      for (const type of Object.keys(data) as (keyof SignalDataSet)[]) {
        const values = data[type];
        if (!values) continue;
        for (const [id, value] of Object.entries(values)) {
          entries.push({
            category: type,
            id,
            value: value === null || value === undefined ? null : encodeAuthValue(value),
          });
        }
      }
      await store.set(entries);
    },
    async clear() {
      await store.clear();
    },
  };
}

/** True when `creds` belong to a linked device: pairing completed (`account` signed by the phone, `me` set). */
export function isPaired(creds: AuthenticationCreds): boolean {
  return Boolean(creds.me?.id && creds.account);
}

/** The stored credentials when they are paired ones, else null (one read, no key loading). */
export async function readPairedCreds(store: AuthStateStore): Promise<AuthenticationCreds | null> {
  const text = (await store.get(CREDS_CATEGORY, [CREDS_ID])).get(CREDS_ID);
  if (text === undefined) return null;
  const creds = decodeAuthValue(text) as AuthenticationCreds;
  return isPaired(creds) ? creds : null;
}

/** The auth state of one instance as the live engine uses it. */
export interface LoadedAuthState {
  /** What `makeWASocket({ auth })` takes: the credentials object (mutated by Baileys) and the cached key store. */
  state: AuthenticationState;
  /** Writes the current credentials (call on every `creds.update`); calls are serialised in order. */
  saveCreds(): Promise<void>;
  /** Drops the in-memory key cache (session end); stored values are untouched. */
  close(): Promise<void>;
}

/** Options of {@link loadAuthState}. */
export interface LoadAuthStateOptions {
  /** Cache for `makeCacheableSignalKeyStore` (default: Baileys' 5-minute TTL NodeCache). */
  cache?: CacheStore;
}

/**
 * Loads an instance's credentials and keys from the auth store (docs/decisions/0025-live-engine.md). Stored
 * credentials that never completed pairing (an abandoned QR or pairing-code attempt) are discarded with every key, so
 * the next attempt starts from fresh `initAuthCreds()` rather than logging in as a half-registered device.
 * @throws the store's error (or SecretError when the master key changed).
 */
export async function loadAuthState(
  store: AuthStateStore,
  logger: BaileysLogger,
  options: LoadAuthStateOptions = {},
): Promise<LoadedAuthState> {
  const stored = (await store.get(CREDS_CATEGORY, [CREDS_ID])).get(CREDS_ID);
  let creds: AuthenticationCreds | undefined;
  if (stored !== undefined) {
    const parsed = decodeAuthValue(stored) as AuthenticationCreds;
    if (isPaired(parsed)) creds = parsed;
    else await store.clear();
  }
  const state: AuthenticationState = {
    creds: creds ?? initAuthCreds(),
    keys: makeCacheableSignalKeyStore(makeSqlKeyStore(store), logger, options.cache),
  };
  let chain: Promise<void> = Promise.resolve();
  return {
    state,
    saveCreds() {
      const run = chain.then(() =>
        store.set([{ category: CREDS_CATEGORY, id: CREDS_ID, value: encodeAuthValue(state.creds) }]),
      );
      chain = run.catch(() => undefined);
      return run;
    },
    async close() {
      await chain;
      await options.cache?.flushAll();
    },
  };
}
