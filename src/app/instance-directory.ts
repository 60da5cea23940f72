import type { Kysely } from 'kysely';
import type { Environment } from '../domain/environment.ts';
import type { Instance } from '../domain/instance.ts';
import { instancesGeneration, listInstances } from '../store/instances.ts';
import type { Database } from '../store/schema.ts';

/** How long an organization's instance list is served from memory, ms, unless told otherwise. */
export const DEFAULT_INSTANCE_CACHE_MS = 500;

/** Most organization-and-environment lists kept at once; the least recently read go first. */
const MAX_ENTRIES = 10_000;

/** What {@link InstanceDirectory} is built from. */
export interface InstanceDirectoryDeps {
  db: Kysely<Database>;
  /** How long a list read from the store is served from memory, ms; 0 reads the store every time. */
  ttlMs: number;
  /** Monotonic milliseconds (default `performance.now`); tests move it by hand. */
  now?: () => number;
}

/** An organization's instances of one environment, oldest first, and whether they came from memory. */
export interface InstanceList {
  instances: readonly Instance[];
  /** True when served from memory: the caller reads the store again before it answers "not found". */
  cached: boolean;
}

interface Entry {
  instances: readonly Instance[];
  generation: number;
  readAt: number;
}

/**
 * The instance lists requests are resolved from, kept in memory for `ttlMs` (docs/decisions/0048-instance-cache.md):
 * a request names its instance out of its organization's list, and reading that list from the store on every request
 * cost a query per request. A list is read again when this process wrote the `instances` table since
 * ({@link instancesGeneration}), or when it is older than `ttlMs`: that is how long a write by another process (the
 * CLI, another node) may go unseen.
 */
export class InstanceDirectory {
  readonly #db: Kysely<Database>;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();

  constructor(deps: InstanceDirectoryDeps) {
    this.#db = deps.db;
    this.#ttlMs = deps.ttlMs;
    this.#now = deps.now ?? (() => performance.now());
  }

  /**
   * Organization `orgId`'s instances of `env`, oldest first: from memory when the list is fresh, else from the store.
   * @throws the store's error when it is read.
   */
  async list(orgId: string, env: Environment): Promise<InstanceList> {
    const entry = this.#entries.get(keyOf(orgId, env));
    if (
      entry !== undefined &&
      entry.generation === instancesGeneration() &&
      this.#now() - entry.readAt < this.#ttlMs
    ) {
      return { instances: entry.instances, cached: true };
    }
    return { instances: await this.read(orgId, env), cached: false };
  }

  /**
   * Reads organization `orgId`'s instances of `env` from the store and keeps them for later requests.
   * @throws the store's error.
   */
  async read(orgId: string, env: Environment): Promise<readonly Instance[]> {
    // Taken before the query: a write while it runs leaves the entry already out of date, so it is read again.
    const generation = instancesGeneration();
    const readAt = this.#now();
    const instances = await listInstances(this.#db, orgId, env);
    if (this.#ttlMs > 0) {
      const key = keyOf(orgId, env);
      this.#entries.delete(key);
      this.#entries.set(key, { instances, generation, readAt });
      if (this.#entries.size > MAX_ENTRIES) {
        const oldest = this.#entries.keys().next();
        if (!oldest.done) this.#entries.delete(oldest.value);
      }
    }
    return instances;
  }
}

function keyOf(orgId: string, env: Environment): string {
  return `${env}:${orgId}`;
}
