import { performance } from 'node:perf_hooks';
import type { OutboundGuard } from '../net/outbound-guard.ts';
import type { BrokerConnection, BrokerMessage } from './connection.ts';
import { BrokerError } from './errors.ts';
import type { BrokerTarget } from './urls.ts';

/** Options of {@link BrokerPublishers}. Durations in milliseconds. */
export interface BrokerPublishersOptions {
  /** Resolves and checks each broker host (docs/decisions/0020-security-promises.md). */
  guard: Pick<OutboundGuard, 'checkedAddresses'>;
  /** An unused connection is closed after this long (default 60,000). */
  idleMs?: number;
  /** Most connections kept open at once; the least recently used goes first (default 64). */
  maxConnections?: number;
}

/** A kept connection and what it was opened for. */
interface Entry {
  /** The checked addresses its host resolved to when it was opened. */
  addresses: string;
  connection: Promise<BrokerConnection>;
  lastUsed: number;
}

/**
 * Publishes events to broker endpoints (docs/decisions/0037-broker-endpoints.md), keeping one connection per broker
 * URL (credentials included) open between attempts. Every attempt resolves the host again and checks each address
 * with the outbound guard; a kept connection is used only while that gives the same addresses and the connection is
 * still up, otherwise a new one dials the checked addresses in order. Attempts for the same URL share one
 * connection being opened. Nothing here retries: a failed attempt is the outbox's to schedule again.
 */
export class BrokerPublishers {
  readonly #guard: Pick<OutboundGuard, 'checkedAddresses'>;
  readonly #idleMs: number;
  readonly #max: number;
  readonly #entries = new Map<string, Entry>();
  readonly #sweeper: NodeJS.Timeout;
  #closed = false;

  constructor(options: BrokerPublishersOptions) {
    this.#guard = options.guard;
    this.#idleMs = options.idleMs ?? 60_000;
    this.#max = Math.max(1, options.maxConnections ?? 64);
    this.#sweeper = setInterval(() => this.#sweep(), Math.min(this.#idleMs, 10_000));
    this.#sweeper.unref();
  }

  /** Number of connections kept (open or being opened). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Publishes `message` to `target`, all of it (lookup, connection, publish and the broker's acknowledgement) within
   * `timeoutMs` milliseconds.
   * @returns the broker's receipt for the delivery log.
   * @throws OutboundError from the guard (`dns`, `blocked-address`, `timeout`); BrokerError for everything the
   *   broker side did; Error when closed.
   */
  async publish(target: BrokerTarget, message: BrokerMessage, timeoutMs: number): Promise<string> {
    if (this.#closed) throw new Error('BrokerPublishers is closed');
    const deadline = performance.now() + timeoutMs;
    const addresses = await this.#guard.checkedAddresses(target.hostname, timeoutMs);
    const connection = await this.#connection(target, addresses, deadline);
    const left = Math.max(1, Math.round(deadline - performance.now()));
    return connection.publish(message, left);
  }

  /** Closes every kept connection. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    const entries = [...this.#entries.values()];
    this.#entries.clear();
    await Promise.all(entries.map((entry) => closeEntry(entry)));
  }

  /** The kept connection for `target` at `addresses`, or a new one. */
  async #connection(target: BrokerTarget, addresses: string[], deadline: number): Promise<BrokerConnection> {
    const key = JSON.stringify(target);
    const list = addresses.join(',');
    const kept = this.#entries.get(key);
    if (kept !== undefined) {
      const usable =
        kept.addresses === list && !(await kept.connection.then((c) => c.closed).catch(() => true));
      if (usable && this.#entries.get(key) === kept) {
        kept.lastUsed = performance.now();
        return kept.connection;
      }
      if (this.#entries.get(key) === kept) {
        this.#entries.delete(key);
        void closeEntry(kept);
      } else {
        // Another attempt replaced it meanwhile: use (or wait for) that one.
        return this.#connection(target, addresses, deadline);
      }
    }
    const entry: Entry = {
      addresses: list,
      connection: dial(target, addresses, deadline),
      lastUsed: performance.now(),
    };
    this.#entries.set(key, entry);
    entry.connection.catch(() => {
      if (this.#entries.get(key) === entry) this.#entries.delete(key);
    });
    this.#evict();
    return entry.connection;
  }

  /** Closes the least recently used connections beyond the maximum. */
  #evict(): void {
    while (this.#entries.size > this.#max) {
      const [oldestKey, oldest] = [...this.#entries.entries()].reduce((a, b) =>
        b[1].lastUsed < a[1].lastUsed ? b : a,
      );
      this.#entries.delete(oldestKey);
      void closeEntry(oldest);
    }
  }

  /** Closes connections unused for longer than the idle time. */
  #sweep(): void {
    const before = performance.now() - this.#idleMs;
    for (const [key, entry] of this.#entries) {
      if (entry.lastUsed < before) {
        this.#entries.delete(key);
        void closeEntry(entry);
      }
    }
  }
}

/** Closes an entry's connection once it is open; never throws. */
async function closeEntry(entry: Entry): Promise<void> {
  await entry.connection.then((connection) => connection.close()).catch(() => {});
}

/**
 * Opens a connection to the first of `addresses` that answers, each given the time left before `deadline`
 * (`performance.now()` milliseconds) divided by the addresses left, as the outbound guard dials HTTPS.
 * @throws BrokerError of the last address tried.
 */
async function dial(
  target: BrokerTarget,
  addresses: readonly string[],
  deadline: number,
): Promise<BrokerConnection> {
  let lastError: unknown;
  // Each client library is imported at its first connection (docs/decisions/0068-engines-loaded-on-first-use.md),
  // before the time left is shared out, so the import counts against the deadline.
  let open: (address: string, timeoutMs: number) => Promise<BrokerConnection>;
  if (target.kind === 'amqp') {
    const { AmqpConnection } = await import('./amqp.ts');
    open = (address, timeoutMs) => AmqpConnection.open(target, address, timeoutMs);
  } else {
    const { NatsConnection } = await import('./nats.ts');
    open = (address, timeoutMs) => NatsConnection.open(target, address, timeoutMs);
  }
  for (const [index, address] of addresses.entries()) {
    const left = deadline - performance.now();
    if (left <= 0) break;
    const timeoutMs = Math.max(1, Math.round(left / (addresses.length - index)));
    try {
      return await open(address, timeoutMs);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError ?? new BrokerError('connecting to the broker timed out');
}
