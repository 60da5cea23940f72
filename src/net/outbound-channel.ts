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
 */
export class OutboundChannel {
  /** Requests written before the first of them is answered (1–{@link MAX_CHANNEL_DEPTH}, a lane's window). */
  readonly depth: number;
  #tail: Promise<void> = Promise.resolve();
  #current: ChannelConnection | undefined;
  /** Connections replaced while requests were still on them, by client. */
  readonly #retiredByClient = new Map<Client, ChannelConnection>();
  #closed = false;

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
   * The connection for a request whose checked addresses give `key`: the channel's current one when its key is
   * the same, else one from `open` (the current one retired). Counts the request as in flight on it until
   * {@link release}. `giveBack` returns a connection to the guard's pool (or closes it) once it is retired and idle.
   */
  acquire(
    key: string,
    open: () => PooledClient,
    giveBack: (pooled: PooledClient, reusable: boolean) => void,
  ): PooledClient {
    let current = this.#current;
    // A retired connection (closed channel, time-out) is never written on again.
    if (current === undefined || current.retired || current.pooled.key !== key) {
      if (current !== undefined && !current.retired) this.#retire(current);
      const pooled = open();
      pooled.client.pipelining = this.depth;
      current = { pooled, inFlight: 0, reusable: true, retired: false, giveBack };
      this.#current = current;
      if (this.#closed) current.retired = true;
    }
    current.inFlight += 1;
    return current.pooled;
  }

  /** Ends a request taken with {@link acquire}; `reusable` false when it failed or left its body unread. */
  release(pooled: PooledClient, reusable: boolean): void {
    const connection = this.#connectionOf(pooled);
    if (connection === undefined) return;
    connection.inFlight -= 1;
    if (!reusable) connection.reusable = false;
    if (connection.inFlight === 0 && connection.retired) this.#giveBack(connection);
  }

  /**
   * Closes the connection of `pooled` at once with `error` for every request on it (one of them timed out): the
   * requests written behind it fail instead of being written again on a new connection. The channel's next
   * request gets a new connection.
   */
  discard(pooled: PooledClient, error: Error): void {
    const connection = this.#connectionOf(pooled);
    if (connection === undefined) return;
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

  #retire(connection: ChannelConnection): void {
    connection.retired = true;
    if (connection.inFlight === 0) this.#giveBack(connection);
    else this.#retiredByClient.set(connection.pooled.client, connection);
  }

  #giveBack(connection: ChannelConnection): void {
    this.#retiredByClient.delete(connection.pooled.client);
    if (this.#current === connection) this.#current = undefined;
    connection.pooled.client.pipelining = 1;
    connection.giveBack(connection.pooled, connection.reusable);
  }
}
