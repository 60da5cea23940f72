import type { AuthenticationCreds, CacheStore } from 'baileys';
import { DomainError } from '../../domain/errors.ts';
import type { AuthStateStore } from '../engine.ts';
import { type LoadedAuthState, loadAuthState, readPairedCreds } from './auth-state.ts';
import type { BaileysLogger } from './socket.ts';

/**
 * What one live session knows of its stored platform credentials (docs/decisions/0016-session-lifecycle.md,
 * docs/decisions/0020-security-promises.md): whether paired credentials exist (read once, cheaply, for the status),
 * the loaded Baileys auth state while connecting or connected, and the deletion on logout or a 401 close. A deletion
 * the store refused is repeated before the next load, so credentials the platform already revoked are never used
 * again by this session.
 */
export class Credentials {
  readonly #store: AuthStateStore;
  readonly #logger: BaileysLogger;
  readonly #keyCache: CacheStore;
  #auth: LoadedAuthState | null = null;
  #paired: boolean | undefined;
  #summary: AuthenticationCreds | null = null;
  /** Deleting the stored credentials failed (store unreachable): done again before the next load. */
  #stale = false;
  /** Deletions begun so far ({@link wipe}): a load that read across one keeps nothing of what it read. */
  #wipes = 0;

  /** `keyCache` is the signal-key cache handed to Baileys (kept across reconnects, flushed on deletion). */
  constructor(store: AuthStateStore, logger: BaileysLogger, keyCache: CacheStore) {
    this.#store = store;
    this.#logger = logger;
    this.#keyCache = keyCache;
  }

  /** The loaded auth state (socket config `auth`, `saveCreds`), or null before {@link load}. */
  get loaded(): LoadedAuthState | null {
    return this.#auth;
  }

  /** The account's credentials while loaded or summarised (own JID, LID, push name), else null. */
  get creds(): AuthenticationCreds | null {
    return this.#auth?.state.creds ?? this.#summary;
  }

  /** True when stored credentials are paired, as last read by {@link summarise} (false before). */
  get paired(): boolean {
    return this.#paired ?? false;
  }

  /** Reads whether paired credentials exist, once, without loading the key store. @throws the store's error. */
  async summarise(): Promise<void> {
    if (this.#auth || this.#paired !== undefined) return;
    this.#summary = await readPairedCreds(this.#store);
    this.#paired = this.#summary !== null;
  }

  /**
   * Loads the Baileys auth state (kept until {@link wipe}); first finishes a deletion that failed earlier.
   * @throws the store's error (nothing is loaded then); DomainError conflict `the stored credentials were deleted
   *   while they loaded` when a {@link wipe} began meanwhile (what was read may be the deleted credentials: nothing
   *   is kept).
   */
  async load(): Promise<LoadedAuthState> {
    if (this.#auth) return this.#auth;
    const wipes = this.#wipes;
    if (this.#stale) {
      await this.#store.clear();
      this.#stale = false;
    }
    const auth = await loadAuthState(this.#store, this.#logger, { cache: this.#keyCache });
    if (wipes !== this.#wipes)
      throw new DomainError('conflict', 'the stored credentials were deleted while they loaded');
    this.#auth = auth;
    this.#summary = null;
    this.#paired = undefined;
    return this.#auth;
  }

  /**
   * Forgets the credentials (the state reports logged out from here on) and deletes them from the store.
   * @throws the store's error; the deletion is then repeated by the next {@link load}.
   */
  async wipe(): Promise<void> {
    this.#wipes += 1;
    const auth = this.#auth;
    this.#auth = null;
    this.#summary = null;
    this.#paired = false;
    this.#stale = true;
    await auth?.close();
    await this.#keyCache.flushAll();
    await this.#store.clear();
    this.#stale = false;
  }

  /**
   * Records the account's new push name in the loaded credentials and saves them, as Baileys does when it
   * processes its own `setting_pushName` app state change (Utils/chat-utils.js; parley runs Baileys with
   * `emitOwnEvents` off, so it never sees its own). A no-op before the credentials are loaded.
   * @throws the store's error.
   */
  async rename(name: string): Promise<void> {
    const me = this.#auth?.state.creds.me;
    if (!this.#auth || !me) return;
    me.name = name;
    await this.#auth.saveCreds();
  }
}
