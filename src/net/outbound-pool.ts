import { performance } from 'node:perf_hooks';
import { type buildConnector, Client } from 'undici';

/** How long an idle pooled connection is kept, ms. */
const POOL_IDLE_MS = 30_000;
/** Most idle pooled connections kept at once. */
const POOL_MAX = 256;

/** A keep-alive client of the pool and what it was created for. */
export interface PooledClient {
  /** Origin and the checked addresses it dials ({@link poolKey}). */
  key: string;
  client: Client;
  /** The address its current connection reached. */
  pinned: { address: string };
  /** Aborts a dial in progress when the client is closed. */
  dialer: AbortController;
  /** `performance.now()` when it was last returned to the pool. */
  idleSince: number;
  /**
   * Whether the last answer from its receiver (its key) left the connection open, no `Connection: close`
   * ({@link ClientPool.learn}): false while none came. A channel pipelines on a client only when this is true
   * (docs/decisions/0058-pipelined-lanes.md).
   */
  keepsAlive: boolean;
}

/** Most receivers (pool keys) whose keep-alive answers the pool remembers. */
const KNOWN_RECEIVERS_MAX = 4096;

/**
 * The pool's key of a client for `url` dialing `addresses`: `<origin>|<address>,…`, the addresses sorted, so a
 * name whose resolver rotates the same checked addresses keeps its connection.
 */
export function poolKey(url: URL, addresses: readonly string[]): string {
  return `${url.origin}|${[...addresses].sort().join(',')}`;
}

/**
 * Makes the connector of a new client: it must dial only `addresses` (already checked) for `url`, within
 * `timeoutMs`, give up when `signal` aborts, and write the address it reached into `pinned`.
 */
export type PinnedConnectorFactory = (
  url: URL,
  addresses: readonly string[],
  timeoutMs: number,
  signal: AbortSignal,
  pinned: { address: string },
) => buildConnector.connector;

/**
 * The outbound guard's keep-alive connections (docs/decisions/0020-security-promises.md): idle clients by origin
 * and the set of checked addresses they dial. A request reuses one only when its own fresh resolution,
 * checked again, gives the same list: every attempt is still resolved, checked and pinned, it just skips a TLS
 * handshake when nothing changed. Several per key (most recently returned last), so concurrent attempts to one
 * receiver, such as the delivery worker's lanes, each keep their connection instead of all but one handshaking
 * anew. At most {@link POOL_MAX} idle clients, each kept {@link POOL_IDLE_MS} ms.
 */
export class ClientPool {
  readonly #connector: PinnedConnectorFactory;
  readonly #active = new Set<Client>();
  readonly #idle = new Map<string, PooledClient[]>();
  /** Idle clients, all keys together. */
  #idleCount = 0;
  /** Whether each receiver's last answer kept its connection open, by key, oldest first. */
  readonly #keepsAlive = new Map<string, boolean>();

  constructor(connector: PinnedConnectorFactory) {
    this.#connector = connector;
  }

  /** Idle pooled connections. */
  get idle(): number {
    return this.#idleCount;
  }

  /**
   * A client for `url` dialing exactly `addresses` (all just checked): the idle pooled one with the same
   * origin and address list, else a new one (pipelining 1). Idle entries older than {@link POOL_IDLE_MS} are
   * closed first.
   */
  checkout(url: URL, addresses: readonly string[], connectTimeoutMs: number): PooledClient {
    const now = performance.now();
    for (const [key, entries] of this.#idle) {
      const fresh = entries.filter((entry) => now - entry.idleSince <= POOL_IDLE_MS);
      if (fresh.length === entries.length) continue;
      for (const entry of entries) if (!fresh.includes(entry)) entry.client.destroy().catch(() => undefined);
      this.#idleCount -= entries.length - fresh.length;
      if (fresh.length === 0) this.#idle.delete(key);
      else this.#idle.set(key, fresh);
    }
    const key = poolKey(url, addresses);
    const idle = this.#idle.get(key)?.pop();
    if (idle !== undefined) {
      this.#idleCount -= 1;
      if (this.#idle.get(key)?.length === 0) this.#idle.delete(key);
      this.#active.add(idle.client);
      idle.keepsAlive = this.#keepsAlive.get(key) ?? false;
      return idle;
    }
    const pinned = { address: '' };
    const dialer = new AbortController();
    const client = new Client(url.origin, {
      connect: this.#connector(url, addresses, connectTimeoutMs, dialer.signal, pinned),
      // The request's own deadline governs every phase; undici's per-phase timers are off.
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: POOL_IDLE_MS,
      keepAliveMaxTimeout: POOL_IDLE_MS,
      pipelining: 1,
    });
    const keepsAlive = this.#keepsAlive.get(key) ?? false;
    const created: PooledClient = { key, client, pinned, dialer, idleSince: now, keepsAlive };
    this.#active.add(client);
    return created;
  }

  /**
   * Notes whether an answer on `entry` left its connection open (`keepsAlive` false for `Connection: close`), for
   * `entry` and every later client to the same receiver, at most {@link KNOWN_RECEIVERS_MAX} receivers
   * remembered (the one whose answer changed last is forgotten last).
   */
  learn(entry: PooledClient, keepsAlive: boolean): void {
    entry.keepsAlive = keepsAlive;
    if (this.#keepsAlive.get(entry.key) === keepsAlive) return;
    this.#keepsAlive.delete(entry.key);
    this.#keepsAlive.set(entry.key, keepsAlive);
    if (this.#keepsAlive.size > KNOWN_RECEIVERS_MAX) {
      const [oldest] = this.#keepsAlive.keys();
      if (oldest !== undefined) this.#keepsAlive.delete(oldest);
    }
  }

  /** Returns a client to the pool after a clean exchange, or closes it (errors, cut-off bodies, closing). */
  checkin(entry: PooledClient, reusable: boolean): void {
    this.#active.delete(entry.client);
    if (!reusable || this.#idleCount >= POOL_MAX) {
      entry.dialer.abort();
      entry.client.destroy().catch(() => undefined);
      return;
    }
    entry.idleSince = performance.now();
    const entries = this.#idle.get(entry.key);
    if (entries === undefined) this.#idle.set(entry.key, [entry]);
    else entries.push(entry);
    this.#idleCount += 1;
  }

  /** Closes every client, in use or idle: their requests in flight fail. */
  async close(): Promise<void> {
    const clients = [...this.#active, ...[...this.#idle.values()].flat().map((entry) => entry.client)];
    this.#active.clear();
    this.#idle.clear();
    this.#idleCount = 0;
    await Promise.all(clients.map((client) => client.destroy().catch(() => undefined)));
  }
}
