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
  /** The checked addresses its host resolved to when it was opened, sorted (a resolver's order may rotate). */
  addresses: string;
  connection: Promise<BrokerConnection>;
  lastUsed: number;
  /** Attempts that took this connection and have not ended yet. */
  users: number;
  /** Set when it was replaced, evicted or idle: retired once its last user ends. */
  retired: boolean;
}

/** A lane's last attempt that was issued to a broker. */
interface Sent {
  /** The connection it went out on. */
  connection: BrokerConnection;
  /** Settles (never rejects) once its publish ended, confirmed or failed. */
  ended: Promise<void>;
}

/**
 * Publishes events to broker endpoints (docs/decisions/0037-broker-endpoints.md), keeping one connection per broker
 * URL (credentials included) open between attempts. Every attempt resolves the host again and checks each address
 * with the outbound guard; a kept connection is used only while that gives the same set of addresses and the
 * connection is still up, otherwise a new one dials the checked addresses in order. Attempts for the same URL share
 * one connection being opened. A connection replaced, evicted or idle is retired, not closed: the publishes other
 * lanes have in flight on it keep their answers (`BrokerConnection.retire`). The attempts of one lane are issued to
 * the broker in the order they were asked for, whatever order their lookups end in; an attempt that gets another
 * connection than the one the lane's previous attempt went out on is issued only once that attempt's publish ended
 * (confirmed or failed), since a broker keeps no order between connections. Nothing here retries: a failed attempt
 * is the outbox's to schedule again.
 */
export class BrokerPublishers {
  readonly #guard: Pick<OutboundGuard, 'checkedAddresses'>;
  readonly #idleMs: number;
  readonly #max: number;
  readonly #entries = new Map<string, Entry>();
  /** Per lane and URL: settles once the lane's latest attempt has issued its message (or failed before). */
  readonly #issued = new Map<string, Promise<void>>();
  /** Per lane and URL: its last issued attempt, while that one's publish has not ended. */
  readonly #sent = new Map<string, Sent>();
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
   * `timeoutMs` milliseconds. With `lane` (the delivery lane's key), the message is issued after the lane's
   * previous attempt to the same URL issued its own (docs/decisions/0058-pipelined-lanes.md: a window's attempts
   * arrive in `sequence` order), and, when it goes out on another connection than the one that previous attempt
   * took (the kept one replaced, evicted or retired meanwhile), after that attempt's publish ended, confirmed or
   * failed (docs/decisions/0037-broker-endpoints.md: brokers order messages per connection only); both waits count
   * against `timeoutMs`.
   * @returns the broker's receipt for the delivery log.
   * @throws OutboundError from the guard (`dns`, `blocked-address`, `timeout`); BrokerError for everything the
   *   broker side did, and `the broker did not answer within <timeoutMs> ms` when the waits leave less than
   *   {@link MIN_PUBLISH_MS}; Error when closed.
   */
  async publish(
    target: BrokerTarget,
    message: BrokerMessage,
    timeoutMs: number,
    lane?: string,
  ): Promise<string> {
    if (this.#closed) throw new Error('BrokerPublishers is closed');
    const deadline = performance.now() + timeoutMs;
    const key = lane === undefined ? undefined : `${lane}|${JSON.stringify(target)}`;
    const turn = key === undefined ? undefined : this.#takeTurn(key);
    try {
      const addresses = await this.#guard.checkedAddresses(target.hostname, timeoutMs);
      await turn?.previous;
      timeLeft(deadline, timeoutMs);
      const entry = await this.#take(target, addresses, deadline);
      try {
        const connection = await entry.connection;
        if (this.#closed) throw new Error('BrokerPublishers is closed');
        if (key !== undefined) await this.#afterPreviousElsewhere(key, connection, deadline, timeoutMs);
        if (this.#closed) throw new Error('BrokerPublishers is closed');
        const publishing = connection.publish(message, timeLeft(deadline, timeoutMs));
        if (key !== undefined) this.#remember(key, connection, publishing);
        turn?.issued();
        return await publishing;
      } finally {
        entry.users -= 1;
        if (entry.retired && entry.users === 0) retireEntry(entry);
      }
    } finally {
      turn?.issued();
    }
  }

  /** Closes every kept connection. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    const entries = [...this.#entries.values()];
    this.#entries.clear();
    await Promise.all(entries.map((entry) => closeEntry(entry)));
  }

  /**
   * A place in the order of `key`'s attempts: `previous` settles once the attempt before it issued its message (it
   * never rejects), and `issued()` lets the next one go (idempotent).
   */
  #takeTurn(key: string): { previous: Promise<void>; issued: () => void } {
    const previous = this.#issued.get(key) ?? Promise.resolve();
    let release: () => void = () => {};
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Settles only after the previous one did, so a later attempt never overtakes one still waiting for its turn.
    const done = previous.then(() => mine);
    this.#issued.set(key, done);
    return {
      previous,
      issued: () => {
        release();
        void done.then(() => {
          if (this.#issued.get(key) === done) this.#issued.delete(key);
        });
      },
    };
  }

  /**
   * Waits, when `key`'s last issued attempt went out on another connection than `connection` and its publish has not
   * ended, until it ends (confirmed or failed: a failed attempt holds nothing back once it failed), at most until
   * {@link MIN_PUBLISH_MS} before `deadline` (`performance.now()` milliseconds).
   * @throws BrokerError `the broker did not answer within <timeoutMs> ms` when that publish has not ended by then.
   */
  async #afterPreviousElsewhere(
    key: string,
    connection: BrokerConnection,
    deadline: number,
    timeoutMs: number,
  ): Promise<void> {
    const previous = this.#sent.get(key);
    if (previous === undefined || previous.connection === connection) return;
    if (!(await endsWithin(previous.ended, deadline - MIN_PUBLISH_MS - performance.now()))) {
      throw new BrokerError(`the broker did not answer within ${timeoutMs} ms`);
    }
  }

  /** Records `publishing` on `connection` as `key`'s last issued attempt, forgotten once it ended. */
  #remember(key: string, connection: BrokerConnection, publishing: Promise<string>): void {
    const sent: Sent = {
      connection,
      ended: publishing.then(
        () => {},
        () => {},
      ),
    };
    this.#sent.set(key, sent);
    void sent.ended.then(() => {
      if (this.#sent.get(key) === sent) this.#sent.delete(key);
    });
  }

  /**
   * The kept connection's entry for `target` at `addresses`, or a new one, counted as used by the caller (who
   * uncounts it when its attempt ends): a connection is retired only once no attempt that took it is left.
   */
  async #take(target: BrokerTarget, addresses: string[], deadline: number): Promise<Entry> {
    if (this.#closed) throw new Error('BrokerPublishers is closed');
    const key = JSON.stringify(target);
    const list = [...addresses].sort().join(',');
    const kept = this.#entries.get(key);
    if (kept !== undefined) {
      const usable =
        kept.addresses === list && !(await kept.connection.then((c) => c.closed).catch(() => true));
      if (usable && this.#entries.get(key) === kept) {
        kept.lastUsed = performance.now();
        kept.users += 1;
        return kept;
      }
      if (this.#entries.get(key) === kept) {
        this.#entries.delete(key);
        retireEntry(kept);
      } else {
        // Another attempt replaced it meanwhile: use (or wait for) that one.
        return this.#take(target, addresses, deadline);
      }
    }
    const entry: Entry = {
      addresses: list,
      connection: dial(target, addresses, deadline),
      lastUsed: performance.now(),
      users: 1,
      retired: false,
    };
    this.#entries.set(key, entry);
    entry.connection.catch(() => {
      if (this.#entries.get(key) === entry) this.#entries.delete(key);
    });
    this.#evict();
    return entry;
  }

  /** Retires the least recently used connections beyond the maximum. */
  #evict(): void {
    while (this.#entries.size > this.#max) {
      const [oldestKey, oldest] = [...this.#entries.entries()].reduce((a, b) =>
        b[1].lastUsed < a[1].lastUsed ? b : a,
      );
      this.#entries.delete(oldestKey);
      retireEntry(oldest);
    }
  }

  /** Retires connections unused for longer than the idle time. */
  #sweep(): void {
    const before = performance.now() - this.#idleMs;
    for (const [key, entry] of this.#entries) {
      if (entry.lastUsed < before) {
        this.#entries.delete(key);
        retireEntry(entry);
      }
    }
  }
}

/**
 * Least time a publish is sent with, milliseconds: an attempt left less than this by its lookup, its lane's earlier
 * attempts and its connection fails before sending, so no message the broker may take goes out with a time limit
 * it cannot meet (its timeout would retire the connection and its retry publish it again).
 */
export const MIN_PUBLISH_MS = 50;

/**
 * The milliseconds left before `deadline` (`performance.now()` time), rounded.
 * @throws BrokerError `the broker did not answer within <timeoutMs> ms` when fewer than {@link MIN_PUBLISH_MS} are
 *   left.
 */
function timeLeft(deadline: number, timeoutMs: number): number {
  const left = Math.round(deadline - performance.now());
  if (left < MIN_PUBLISH_MS) throw new BrokerError(`the broker did not answer within ${timeoutMs} ms`);
  return left;
}

/**
 * Whether `work` (which never rejects) ends within `ms` milliseconds (at once when `ms` is not above 0, though
 * `work` that has already ended still counts).
 */
async function endsWithin(work: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms));
  });
  try {
    return await Promise.race([work.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Closes an entry's connection once it is open, failing what is in flight on it; never throws. */
async function closeEntry(entry: Entry): Promise<void> {
  await entry.connection.then((connection) => connection.close()).catch(() => {});
}

/**
 * Marks an entry retired, and retires its connection (`BrokerConnection.retire`) once it is open and no attempt that
 * took it is left (else the last one's end does it); never throws.
 */
function retireEntry(entry: Entry): void {
  entry.retired = true;
  if (entry.users > 0) return;
  entry.connection.then(
    (connection) => connection.retire(),
    () => {},
  );
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
