import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { Environment } from '../domain/environment.ts';
import { errors } from '../domain/errors.ts';
import { grants, type Scope } from '../domain/scope.ts';
import { digestsEqual, hashApiKey, parseApiKey } from '../security/api-keys.ts';
import { type ApiKeyRecord, findApiKeyByHash, revokedAmong, touchApiKey } from '../store/api-keys.ts';
import { getOrganization, getOrganizations, type Organization } from '../store/organizations.ts';
import type { StoreSignals } from '../store/pg-signals.ts';
import type { Database } from '../store/schema.ts';

/** Who a request acts as, once its key is verified (docs/decisions/0003-scopes-and-keys.md). */
export interface AuthContext {
  keyId: string;
  org: Organization;
  env: Environment;
  scopes: ReadonlySet<Scope>;
  /** Instance ids the key may address; empty = every instance of the org in `env`. */
  instanceIds: readonly string[];
}

/** Options of the {@link KeyAuthenticator}; times in milliseconds. */
export interface KeyAuthenticatorOptions {
  /** How long a verified key stays cached (revocation and expiry still apply at once). */
  ttlMs: number;
  /** How often to look for keys revoked by another process (e.g. `parley key revoke`). */
  revocationPollMs: number;
  /** Minimum time between two `last_used_at` writes for one key. */
  touchEveryMs: number;
  clock: Clock;
  logger: FastifyBaseLogger;
}

/** A verified key as the cache keeps it: what each request needs, derived once when it was read. */
interface CacheEntry {
  key: ApiKeyRecord;
  org: Organization;
  scopes: ReadonlySet<Scope>;
  /** Epoch ms, or null when the key never expires. */
  expiresAtMs: number | null;
  cachedAt: number;
}

const BEARER = /^Bearer ([^\s]+)$/i;

/** Whether two reads of one organization are the same in every field (its plan and limits included). */
function sameOrganization(a: Organization, b: Organization): boolean {
  const fields = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof Organization>;
  return [...fields].every((field) => a[field] === b[field]);
}

/**
 * True when `context` carries `scope`, or `chat:*` and `scope` is a `chat:` scope (docs/decisions/0003-scopes-and-keys.md;
 * `instances:manage` is never implied, docs/decisions/0029-instances-over-the-api.md).
 */
export function hasScope(context: AuthContext, scope: Scope): boolean {
  return grants(context.scopes, scope);
}

/**
 * Verifies `Authorization: Bearer <key>` headers (docs/api.md#conventions, docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0020-security-promises.md): SHA-256 lookup in a short cache, else format and CRC32 checked before
 * the store's lookup and the digests compared in constant time; revocation and expiry at every request. Every
 * failure raises the same 401 `invalid API key`.
 * Revocations made by any process evict cached entries within one poll interval (revocation happens in the admin CLI,
 * another process), whatever the clocks of the revoking host and of this one say (each poll reads the cached keys'
 * own rows, docs/decisions/0119-revocation-look-reads-the-cached-keys.md), and at once where the store signals them
 * (PostgreSQL, docs/decisions/0078-store-signals.md). So
 * do changes of an organization's plan or limits (`parley org update`), since each entry holds its organization:
 * the same look reads the cached organizations again (docs/decisions/0019-rate-limits-and-plans.md).
 */
export class KeyAuthenticator {
  readonly #db: Kysely<Database>;
  readonly #options: KeyAuthenticatorOptions;
  readonly #cache = new Map<string, CacheEntry>();
  readonly #lastTouch = new Map<string, number>();
  /**
   * Revocation looks started so far ({@link pollRevocations}): a key read that one overlapped may hold a row from
   * before the revocation the look was for, which the look could not evict (it was not cached yet), so it is not
   * cached (docs/decisions/0078-store-signals.md).
   */
  #revocationLooks = 0;
  #timer: NodeJS.Timeout | undefined;
  #unlisten: (() => void) | undefined;

  constructor(db: Kysely<Database>, options: KeyAuthenticatorOptions) {
    this.#db = db;
    this.#options = options;
  }

  /**
   * Resolves the caller of a request.
   * @param header the raw `Authorization` header value, if any.
   * @throws DomainError unauthenticated `invalid API key` when missing, malformed, unknown, revoked or expired.
   */
  async authenticate(header: string | undefined): Promise<AuthContext> {
    const match = header === undefined ? null : BEARER.exec(header.trim());
    const presented = match?.[1];
    if (presented === undefined) throw errors.invalidKey();
    const hash = hashApiKey(presented);
    const now = this.#options.clock();
    let entry = this.#cache.get(hash);
    if (entry && now - entry.cachedAt > this.#options.ttlMs) {
      this.#cache.delete(hash);
      entry = undefined;
    }
    if (!entry) {
      // Shape and checksum before the store is asked (a key found in the cache passed them when it was cached).
      if (parseApiKey(presented) === null) throw errors.invalidKey();
      const looks = this.#revocationLooks;
      const key = await findApiKeyByHash(this.#db, hash);
      const org = key ? await getOrganization(this.#db, key.orgId) : undefined;
      // The digests compared in constant time once, when the store's row is taken: the cache is keyed by the digest.
      if (!key || !org || !digestsEqual(key.keyHash, hash)) throw errors.invalidKey();
      const expiresAtMs = key.expiresAt === null ? null : Date.parse(key.expiresAt);
      entry = { key, org, scopes: new Set(key.scopes), expiresAtMs, cachedAt: now };
      // A revocation look started while the row was read may have come and gone without it: this request is answered
      // from the row (it raced the revocation), the next one reads it again.
      if (looks === this.#revocationLooks) this.#cache.set(hash, entry);
    }
    const { key, org } = entry;
    if (key.revokedAt !== null) throw errors.invalidKey();
    if (entry.expiresAtMs !== null && entry.expiresAtMs <= now) throw errors.invalidKey();
    this.#touch(key.id, now);
    return { keyId: key.id, org, env: key.env, scopes: entry.scopes, instanceIds: key.instanceIds };
  }

  /** Starts polling for revocations made by other processes. */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.pollRevocations(), this.#options.revocationPollMs);
    this.#timer.unref();
  }

  /**
   * Looks for revocations and organization changes as soon as `signals` tell of one (a key revoked, or a plan changed,
   * in any process of the store) or may have missed one (a gap), besides the poll, which stays
   * (docs/decisions/0078-store-signals.md). Undone by {@link stop}.
   */
  listen(signals: StoreSignals): void {
    this.#unlisten?.();
    const unsubscribe = signals.subscribe('keys', () => void this.pollRevocations());
    const unwatch = signals.onGap(() => void this.pollRevocations());
    this.#unlisten = () => {
      unsubscribe();
      unwatch();
    };
  }

  /** Stops polling, and listening to signals. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#unlisten?.();
    this.#unlisten = undefined;
  }

  /**
   * Drops the key whose SHA-256 digest (lowercase hex) is `keyHash` from this process's cache at once, for a key this
   * process has just revoked (the dashboard's revoke, docs/decisions/0003-scopes-and-keys.md): its next request reads
   * the revoked row. A read of that key already under way is not cached either, as with {@link pollRevocations}.
   */
  forget(keyHash: string): void {
    this.#revocationLooks += 1;
    this.#cache.delete(keyHash);
  }

  /**
   * Evicts the cached keys that were revoked (by any process) or whose row is gone: each look reads the rows of the
   * keys cached when it starts, by their digests, so a revocation is found whatever time it was stamped with and
   * whatever this process's clock says (a host whose clock runs ahead or behind, a time set by hand;
   * docs/decisions/0119-revocation-look-reads-the-cached-keys.md). Errors are logged, not thrown. The same look then
   * reads the organizations of the cached keys and evicts the keys whose organization changed (its plan or limits:
   * `parley org update`, another process) or is gone, so a plan change applies everywhere within about one poll
   * (docs/decisions/0019-rate-limits-and-plans.md). A key read by {@link authenticate} while a poll runs is not
   * cached: the poll may be for its revocation (or its organization's change) and have found nothing cached to evict.
   */
  async pollRevocations(): Promise<void> {
    this.#revocationLooks += 1;
    const cached = [...this.#cache.keys()];
    if (cached.length > 0) {
      try {
        for (const hash of await revokedAmong(this.#db, cached)) this.#cache.delete(hash);
      } catch (error) {
        this.#options.logger.warn({ err: error }, 'polling key revocations failed');
      }
    }
    await this.#evictChangedOrganizations();
  }

  /** Evicts the cached keys whose organization's row no longer equals the one cached. Errors are logged. */
  async #evictChangedOrganizations(): Promise<void> {
    const ids = new Set<string>();
    for (const entry of this.#cache.values()) ids.add(entry.org.id);
    if (ids.size === 0) return;
    try {
      const current = new Map((await getOrganizations(this.#db, [...ids])).map((org) => [org.id, org]));
      for (const [hash, entry] of this.#cache) {
        const org = current.get(entry.org.id);
        if (org === undefined || !sameOrganization(org, entry.org)) this.#cache.delete(hash);
      }
    } catch (error) {
      this.#options.logger.warn({ err: error }, 'polling organization changes failed');
    }
  }

  #touch(keyId: string, now: number): void {
    const last = this.#lastTouch.get(keyId) ?? 0;
    if (now - last < this.#options.touchEveryMs) return;
    this.#lastTouch.set(keyId, now);
    touchApiKey(this.#db, keyId, new Date(now).toISOString()).catch((error: unknown) => {
      this.#options.logger.warn({ err: error }, 'recording key use failed');
    });
  }
}
