import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { JetStreamApiError, type JetStreamClient, jetstream } from '@nats-io/jetstream';
import {
  type NatsConnection as CoreConnection,
  connect,
  headers,
  type MsgHdrs,
} from '@nats-io/transport-node';
import { withTimeout } from '../domain/time-limit.ts';
import { type BrokerConnection, type BrokerMessage, PublishesInFlight } from './connection.ts';
import { BrokerError, openWithin, publishError } from './errors.ts';
import type { NatsTarget } from './urls.ts';

/** True when `error` (or its cause) says nothing answered the request: no JetStream stream takes the subject. */
function noResponders(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause.name === 'JetStreamNotEnabled' || /no responders/i.test(cause.message)) return true;
  }
  return false;
}

/**
 * True when `error` (or its cause) is JetStream's own refusal of the message (an API error such as a stream's
 * limits): the connection itself is fine.
 */
function refusedByStream(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof JetStreamApiError) return true;
  }
  return false;
}

/**
 * True when `error` says the reply to the publish was not a JetStream acknowledgement at all: not JSON (a plain
 * subscriber's text), or JSON the client library took for an invalid acknowledgement.
 */
function notAnAck(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof SyntaxError || /invalid ack response/i.test(cause.message)) return true;
  }
  return false;
}

/**
 * True when `error` (or its cause) is the client library refusing the message before sending it (an invalid
 * argument: a payload over the server's `max_payload`, headers the server does not take): nothing was sent, and the
 * connection is fine.
 */
function refusedByClient(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause.name === 'InvalidArgumentError') return true;
  }
  return false;
}

/** The header JetStream's publish sets to the message id (its duplicate window's key): counted in a message's size. */
const MSG_ID_HEADER = 'Nats-Msg-Id';

/**
 * The error of an event too large for the NATS server: `bytes` what the server counts against its `max_payload`
 * (the body and the encoded headers), `max` that limit as the server announced it when a connection opened.
 */
function tooLargeForNats(bytes: number, max: number): BrokerError {
  return new BrokerError(
    `event of ${bytes} bytes is larger than the NATS server's max_payload of ${max} bytes`,
  );
}

/** True when `error` is the client library's own time-out of the request (its timer may end before ours). */
function timedOut(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause.name === 'TimeoutError') return true;
  }
  return false;
}

/** The error text of a reply that is not a JetStream acknowledgement: no stream took the message. */
function notAcknowledged(subject: string): string {
  return `no JetStream stream captures subject ${subject}: the reply was not a JetStream acknowledgement`;
}

/**
 * Opens a client connection to `address` (a checked address of `target.hostname`) with the URL's user and password
 * or token, never reconnecting and ignoring the servers a cluster advertises, within `timeoutMs` milliseconds.
 * @throws BrokerError as {@link NatsConnection.open} does.
 */
async function dial(target: NatsTarget, address: string, timeoutMs: number): Promise<CoreConnection> {
  const host = isIP(address) === 6 ? `[${address}]` : address;
  const opening = connect({
    servers: `${host}:${target.port}`,
    name: 'parley',
    reconnect: false,
    ignoreClusterUpdates: true,
    timeout: timeoutMs,
    ...(target.token === undefined ? {} : { token: target.token }),
    ...(target.user === undefined ? {} : { user: target.user, pass: target.pass ?? '' }),
  });
  return openWithin(opening, timeoutMs, (connection) => connection.close());
}

/** Milliseconds left of `timeoutMs` since `started` (`performance.now()`), at least 1. */
function leftOf(timeoutMs: number, started: number): number {
  return Math.max(1, Math.round(timeoutMs - (performance.now() - started)));
}

/**
 * A connection to NATS with JetStream (docs/decisions/0037-broker-endpoints.md). A publish is JetStream's
 * acknowledged publish with `Nats-Msg-Id` set to the event id, so a retry after a lost acknowledgement is recognised
 * by the stream's duplicate window instead of stored twice. The connection never reconnects on its own
 * (`reconnect: false`) and ignores the servers a cluster advertises: every connection dials only addresses the
 * outbound guard checked, and a broken one is replaced at the next attempt. An event larger than the `max_payload`
 * the server announced when the connection opened is tried on a connection of its own, which learns the server's
 * limit of the moment (a reloaded one included: the server does not announce it to connected clients); the
 * publishes issued after it on this connection wait until it was acknowledged or failed.
 */
export class NatsConnection implements BrokerConnection {
  readonly #connection: CoreConnection;
  readonly #jetstream: JetStreamClient;
  /** What the connection was opened to: an event over its `max_payload` is tried on a connection of its own. */
  readonly #target: NatsTarget;
  readonly #address: string;
  /** Settles once the publishes sent on connections of their own so far have ended; unset when none is. */
  #alone: Promise<void> | undefined;
  readonly #inFlight = new PublishesInFlight(() => this.close());
  #closed = false;

  private constructor(connection: CoreConnection, target: NatsTarget, address: string, timeoutMs: number) {
    this.#connection = connection;
    this.#target = target;
    this.#address = address;
    this.#jetstream = jetstream(connection, { timeout: timeoutMs });
    void connection.closed().then(() => {
      this.#closed = true;
    });
  }

  /**
   * Connects to `address` (a checked address of `target.hostname`) with the URL's user and password or token.
   * @param timeoutMs time allowed for the connection, and later for each acknowledgement, milliseconds.
   * @throws BrokerError `could not connect to the broker (ECONNREFUSED)`, `the broker refused the connection: …`
   *   (authorization), or a timeout.
   */
  static async open(target: NatsTarget, address: string, timeoutMs: number): Promise<NatsConnection> {
    return new NatsConnection(await dial(target, address, timeoutMs), target, address, timeoutMs);
  }

  get closed(): boolean {
    return this.#closed || this.#inFlight.retiring || this.#connection.isClosed();
  }

  retire(): void {
    this.#inFlight.retire();
  }

  async publish(message: BrokerMessage, timeoutMs: number): Promise<string> {
    if (this.closed) throw new BrokerError('the connection to the broker was closed');
    return this.#inFlight.run(() => this.#publish(message, timeoutMs));
  }

  /**
   * One acknowledged publish. Only a JetStream acknowledgement counts: a reply naming a stream and its sequence
   * number. Any other reply (a plain NATS subscriber answering on the subject) fails the attempt, which the outbox
   * retries: the message was not stored in a stream. A message larger than the `max_payload` the server announced
   * when this connection opened (1 MiB by default) is not sent on it: the client library would refuse it, and the
   * server announces no limit raised since (docs/decisions/0037-broker-endpoints.md "Message size"). It is tried on
   * a connection of its own ({@link #publishAlone}), which learns the server's limit of now.
   */
  async #publish(message: BrokerMessage, timeoutMs: number): Promise<string> {
    const started = performance.now();
    const h = headers();
    for (const [name, value] of Object.entries(message.headers)) h.set(name, value);
    // JetStream's publish sets it again, to the same value: set here, it is counted in the size below.
    h.set(MSG_ID_HEADER, message.id);
    // What the server counts: the body and the headers as encoded on the wire (`NATS/1.0`, a line each).
    const bytes = Buffer.byteLength(message.body, 'utf8') + Buffer.byteLength(h.toString(), 'utf8');
    const max = this.#connection.info?.max_payload;
    const before = this.#alone;
    if (max !== undefined && bytes > max) {
      const alone = this.#afterAlone(before, timeoutMs, started).then(() =>
        this.#publishAlone(message, h, bytes, timeoutMs, started),
      );
      const ended = alone.then(
        () => {},
        () => {},
      );
      this.#alone = ended;
      void ended.then(() => {
        if (this.#alone === ended) this.#alone = undefined;
      });
      return alone;
    }
    await this.#afterAlone(before, timeoutMs, started);
    return this.#acknowledged(this.#jetstream, message, h, leftOf(timeoutMs, started), true);
  }

  /**
   * Waits for `alone` (the publishes on a connection of their own issued before this one) to end, within what is
   * left of `timeoutMs` since `started`: a broker keeps order per connection only, so an event issued after one sent
   * on another connection goes out once that one was acknowledged or failed.
   * @throws BrokerError `the broker did not answer within <timeoutMs> ms`, nothing sent.
   */
  async #afterAlone(alone: Promise<void> | undefined, timeoutMs: number, started: number): Promise<void> {
    if (alone === undefined) return;
    await withTimeout(
      alone,
      leftOf(timeoutMs, started),
      () => new BrokerError(`the broker did not answer within ${timeoutMs} ms`),
    );
  }

  /**
   * Publishes `message` (`bytes` as the server counts it), larger than the `max_payload` this connection was told,
   * on a connection of its own to the same address, closed afterwards. A NATS server applies a reloaded
   * `max_payload` to its connected clients without telling them (no new INFO), so only a new connection learns it:
   * within that connection's limit (the operator raised it) the event is published there, once the publishes sent
   * before it on this connection have reached the server (a flush), so a lane's earlier events come first; over it,
   * the attempt fails with {@link tooLargeForNats} naming the server's limit of now, without sending. This
   * connection is left as it was either way.
   * @param started when the attempt began (`performance.now()`), so the whole attempt keeps within `timeoutMs`.
   * @throws BrokerError as {@link #publish} does, and {@link dial}'s errors when the connection of its own fails.
   */
  async #publishAlone(
    message: BrokerMessage,
    h: MsgHdrs,
    bytes: number,
    timeoutMs: number,
    started: number,
  ): Promise<string> {
    const own = await dial(this.#target, this.#address, leftOf(timeoutMs, started));
    try {
      const max = own.info?.max_payload;
      if (max !== undefined && bytes > max) throw tooLargeForNats(bytes, max);
      try {
        await withTimeout(
          this.#connection.flush(),
          leftOf(timeoutMs, started),
          () => new BrokerError(`the broker did not answer within ${timeoutMs} ms`),
        );
      } catch (error) {
        // Nothing was sent on the connection of its own; this one did not answer: replace it.
        this.retire();
        throw publishError(error);
      }
      const left = leftOf(timeoutMs, started);
      return await this.#acknowledged(jetstream(own, { timeout: left }), message, h, left, false);
    } finally {
      await own.close().catch(() => {});
    }
  }

  /**
   * Publishes `message` with headers `h` through `js` and waits for its acknowledgement, within `timeoutMs`.
   * @param retireOnLoss whether a publish neither acknowledged nor refused retires this connection (false for a
   *   connection of its own, which is closed anyway).
   * @throws BrokerError `no JetStream stream captures subject …` (none, or a reply that is no acknowledgement), `the
   *   broker refused the message: …` (a stream's limits, the client's own refusal), `the broker did not acknowledge
   *   the message within …`, or `the connection to the broker ended before it answered: …`.
   */
  async #acknowledged(
    js: JetStreamClient,
    message: BrokerMessage,
    h: MsgHdrs,
    timeoutMs: number,
    retireOnLoss: boolean,
  ): Promise<string> {
    try {
      const ack = await withTimeout(
        js.publish(message.subject, message.body, {
          msgID: message.id,
          headers: h,
          timeout: timeoutMs,
        }),
        timeoutMs,
        () => new BrokerError(`the broker did not acknowledge the message within ${timeoutMs} ms`),
      );
      const stream: unknown = ack.stream;
      const seq: unknown = ack.seq;
      if (
        typeof stream !== 'string' ||
        stream === '' ||
        typeof seq !== 'number' ||
        !Number.isSafeInteger(seq) ||
        seq < 1
      ) {
        throw new BrokerError(notAcknowledged(message.subject));
      }
      return `stored in JetStream stream ${stream} as message ${seq}${ack.duplicate ? ' (a duplicate: kept once)' : ''}`;
    } catch (error) {
      if (error instanceof BrokerError && error.message.startsWith('no JetStream stream')) throw error;
      if (noResponders(error)) {
        throw new BrokerError(`no JetStream stream captures subject ${message.subject}`, { cause: error });
      }
      // A reply that is no acknowledgement, a stream's refusal, or the client's refusal of the message before it
      // was sent (its own check of max_payload, should a size counted above differ) leaves the connection as it was.
      if (notAnAck(error)) throw new BrokerError(notAcknowledged(message.subject), { cause: error });
      if (refusedByStream(error) || refusedByClient(error)) throw publishError(error);
      // Nothing more can be told of a message that was neither acknowledged nor refused: start afresh, once the
      // other lanes' publishes on this connection have ended.
      if (retireOnLoss) this.retire();
      if (timedOut(error)) {
        throw new BrokerError(`the broker did not acknowledge the message within ${timeoutMs} ms`, {
          cause: error,
        });
      }
      throw publishError(error);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#connection.close().catch(() => {});
  }
}
