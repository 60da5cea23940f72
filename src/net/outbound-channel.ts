import type { Client } from 'undici';
import type { PooledClient } from './outbound-pool.ts';

/**
 * Ordered channels of the outbound guard (docs/decisions/0058-pipelined-lanes.md): one sender's requests written
 * on one keep-alive connection, pipelined (RFC 9112, section 9.3.2), in the order the sender issued them, so they
 * reach the receiver in that order and its answers come back in it.
 */

/** A connection a channel writes on, and how it goes back to the pool once its last request has ended. */
interface ChannelConnection {
  pooled: PooledClient;
  /** Requests of the channel on it that have not ended. */
  inFlight: number;
  /** Settles once the last request taken on it has ended (the next one's `ahead`). */
  lastEnded: Promise<void>;
  /** Marks the connection's loss while requests are on it ({@link OutboundChannel} single-file rule). */
  onDisconnect: () => void;
  /** False once one of its requests failed or left a body unread: it is closed, not pooled, at the end. */
  reusable: boolean;
  /** Replaced by a connection to other addresses, or the channel closed: given back when idle. */
  retired: boolean;
  giveBack: (pooled: PooledClient, reusable: boolean) => void;
}

/** A request's place in its channel's order: `ready` once the request before it was written. */
export interface ChannelTurn {
  ready: Promise<void>;
  /** Lets the next request be written (called once this one is written or has failed). Idempotent. */
  pass: () => void;
}

/**
 * A request's place on a channel's connection ({@link OutboundChannel.acquire}); handed back to
 * {@link OutboundChannel.answered} and {@link OutboundChannel.release}.
 */
export interface ChannelPlace {
  /** The connection it is written on. */
  readonly pooled: PooledClient;
  /**
   * Settles once every request taken on the same connection before it has ended, so its answer is the next the
   * receiver owes; undefined when none was pending when it was taken. The guard counts the request's time-out
   * from then (docs/decisions/0058-pipelined-lanes.md).
   */
  readonly ahead: Promise<void> | undefined;
  /** Settles this place's end for the request behind it (called by {@link OutboundChannel.release}). */
  readonly end: () => void;
}

/** Whether an answer's `connection` header (names lowercased) asks to close the connection (RFC 9112, 9.6). */
export function closesConnection(headers: Readonly<Record<string, string>>): boolean {
  const options = headers.connection?.toLowerCase().split(',') ?? [];
  return options.some((option) => option.trim() === 'close');
}

/** Most requests a channel writes before the first of them is answered: a lane's largest window. */
export const MAX_CHANNEL_DEPTH = 128;

/**
 * Requests of one sender that must reach their receiver in the order they were issued: a webhook lane with more
 * than one request in flight (docs/decisions/0050-lane-windows.md, docs/decisions/0058-pipelined-lanes.md). Pass
 * it as {@link OutboundRequest.channel}: the guard still resolves and checks the host of every request
 * (docs/decisions/0020-security-promises.md), then writes the requests on one connection, up to `depth` of them
 * before the first is answered. A request whose checked addresses differ from the connection's gets a new
 * connection (the old one is given back once its requests ended); only then can two requests of a channel travel
 * on different connections. {@link close} when the sender is done; requests issued after it are still sent.
 *
 * It writes one request at a time until an answer showed the receiver keeps its connection open (the pooled
 * client's `keepsAlive`), and one at a time again for the rest of its life once an answer said `Connection: close`
 * or a connection was lost with requests on it: the requests undici writes again on a new connection after such a
 * loss then go one at a time, so each reaches the receiver at most twice (docs/decisions/0058-pipelined-lanes.md).
 */
export class OutboundChannel {
  /** Requests written before the first of them is answered (1–{@link MAX_CHANNEL_DEPTH}, a lane's window). */
  readonly depth: number;
  #tail: Promise<void> = Promise.resolve();
  #current: ChannelConnection | undefined;
  /** Connections replaced while requests were still on them, by client. */
  readonly #retiredByClient = new Map<Client, ChannelConnection>();
  #closed = false;
  /** Set once an answer closed a connection or one was lost under requests: one request at a time from then on. */
  #singleFile = false;

  /** @throws RangeError when `depth` is not an integer from 1 to {@link MAX_CHANNEL_DEPTH}. */
  constructor(depth: number) {
    if (!(Number.isInteger(depth) && depth >= 1 && depth <= MAX_CHANNEL_DEPTH)) {
      throw new RangeError(`a channel depth is an integer from 1 to ${MAX_CHANNEL_DEPTH}`);
    }
    this.depth = depth;
  }

  /**
   * Takes the next place in the channel's order. Called synchronously when the request is issued, before any
   * wait, so the order is the order of the calls.
   */
  enter(): ChannelTurn {
    const before = this.#tail;
    let pass = () => {};
    const passed = new Promise<void>((resolve) => {
      pass = resolve;
    });
    // The next request waits for this one and for every one before it: a request that fails before its turn
    // (its lookup refused, its time up) must not let the ones behind it overtake the ones ahead of it.
    this.#tail = before.then(() => passed);
    return { ready: before, pass };
  }

  /**
   * A place for a request whose checked addresses give `key`, on the channel's current connection when its key is
   * the same, else on one from `open` (the current one retired). Counts the request as in flight on it until
   * {@link release}. `giveBack` returns a connection to the guard's pool (or closes it) once it is retired and idle.
   */
  acquire(
    key: string,
    open: () => PooledClient,
    giveBack: (pooled: PooledClient, reusable: boolean) => void,
  ): ChannelPlace {
    let current = this.#current;
    // A retired connection (closed channel, time-out) is never written on again.
    if (current === undefined || current.retired || current.pooled.key !== key) {
      if (current !== undefined && !current.retired) this.#retire(current);
      current = this.#open(open(), giveBack);
    }
    const ahead = current.inFlight > 0 ? current.lastEnded : undefined;
    let end = () => {};
    const ended = new Promise<void>((resolve) => {
      end = resolve;
    });
    current.lastEnded = ended;
    current.inFlight += 1;
    return { pooled: current.pooled, ahead, end };
  }

  /**
   * The answer to the request at `place` has arrived; `keepsAlive` false when it said `Connection: close` (the
   * guard has noted it in its pool: `ClientPool.learn`). Opens the connection to the channel's depth once the
   * receiver showed it keeps connections open, or puts the channel to one request at a time for the rest of its life.
   */
  answered(place: ChannelPlace, keepsAlive: boolean): void {
    const { pooled } = place;
    if (!keepsAlive) {
      this.#goSingleFile(pooled);
      return;
    }
    const connection = this.#connectionOf(pooled);
    const opens = connection !== undefined && !connection.retired && !this.#singleFile;
    if (opens && pooled.client.pipelining !== this.depth) pooled.client.pipelining = this.depth;
  }

  /** Ends the request at `place`; `reusable` false when it failed or left its body unread. */
  release(place: ChannelPlace, reusable: boolean): void {
    place.end();
    const connection = this.#connectionOf(place.pooled);
    if (connection === undefined) return;
    connection.inFlight -= 1;
    if (!reusable) connection.reusable = false;
    if (connection.inFlight === 0 && connection.retired) this.#giveBack(connection);
  }

  /**
   * Closes the connection of `pooled` at once with `error` for every request on it (one of them timed out, or its
   * answer could not be read to its end): the requests written behind it fail instead of being written again on a
   * new connection. The channel's next request gets a new connection, and carries one request at a time.
   */
  discard(pooled: PooledClient, error: Error): void {
    const connection = this.#connectionOf(pooled);
    if (connection === undefined) return;
    this.#singleFile = true;
    connection.reusable = false;
    if (this.#current === connection) this.#retire(connection);
    pooled.client.destroy(error).catch(() => undefined);
  }

  /** No more requests are expected: the connection goes back to the pool once its requests ended. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#current !== undefined) this.#retire(this.#current);
  }

  /** The channel's connection of `pooled`: the current one, or one retired with requests still on it. */
  #connectionOf(pooled: PooledClient): ChannelConnection | undefined {
    return this.#current?.pooled === pooled ? this.#current : this.#retiredByClient.get(pooled.client);
  }

  /**
   * Makes `pooled` the current connection: pipelined to the depth only when its receiver is known to keep
   * connections open and the channel is not single file; watched for a loss while requests are on it.
   */
  #open(
    pooled: PooledClient,
    giveBack: (pooled: PooledClient, reusable: boolean) => void,
  ): ChannelConnection {
    pooled.client.pipelining = pooled.keepsAlive && !this.#singleFile ? this.depth : 1;
    const connection: ChannelConnection = {
      pooled,
      inFlight: 0,
      lastEnded: Promise.resolve(),
      onDisconnect: () => {
        // undici emits `disconnect` before it writes the requests that were on the lost connection again (its
        // client-h1.js `onHttpSocketClose`): they then go one at a time, each at most once more.
        if (connection.inFlight > 0) this.#goSingleFile(pooled);
      },
      reusable: true,
      retired: false,
      giveBack,
    };
    pooled.client.on('disconnect', connection.onDisconnect);
    this.#current = connection;
    if (this.#closed) connection.retired = true;
    return connection;
  }

  /** One request at a time from now on, on `pooled` and on every later connection of the channel. */
  #goSingleFile(pooled: PooledClient): void {
    this.#singleFile = true;
    pooled.client.pipelining = 1;
  }

  #retire(connection: ChannelConnection): void {
    connection.retired = true;
    if (connection.inFlight === 0) this.#giveBack(connection);
    else this.#retiredByClient.set(connection.pooled.client, connection);
  }

  #giveBack(connection: ChannelConnection): void {
    this.#retiredByClient.delete(connection.pooled.client);
    connection.pooled.client.off('disconnect', connection.onDisconnect);
    if (this.#current === connection) this.#current = undefined;
    connection.pooled.client.pipelining = 1;
    connection.giveBack(connection.pooled, connection.reusable);
  }
}
