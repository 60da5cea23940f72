import { isIP } from 'node:net';
import { JetStreamApiError, type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { type NatsConnection as CoreConnection, connect, headers } from '@nats-io/transport-node';
import { withTimeout } from '../domain/time-limit.ts';
import { type BrokerConnection, type BrokerMessage, PublishesInFlight } from './connection.ts';
import { BrokerError, connectError, publishError } from './errors.ts';
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
 * (the body and the encoded headers), `max` that limit as the server announced it when the connection opened.
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
 * A connection to NATS with JetStream (docs/decisions/0037-broker-endpoints.md). A publish is JetStream's
 * acknowledged publish with `Nats-Msg-Id` set to the event id, so a retry after a lost acknowledgement is recognised
 * by the stream's duplicate window instead of stored twice. The connection never reconnects on its own
 * (`reconnect: false`) and ignores the servers a cluster advertises: every connection dials only addresses the
 * outbound guard checked, and a broken one is replaced at the next attempt.
 */
export class NatsConnection implements BrokerConnection {
  readonly #connection: CoreConnection;
  readonly #jetstream: JetStreamClient;
  readonly #inFlight = new PublishesInFlight(() => this.close());
  #closed = false;

  private constructor(connection: CoreConnection, timeoutMs: number) {
    this.#connection = connection;
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
    try {
      const connection = await withTimeout(
        opening,
        timeoutMs,
        () => new BrokerError(`connecting to the broker timed out after ${timeoutMs} ms`),
      );
      return new NatsConnection(connection, timeoutMs);
    } catch (error) {
      opening.then(
        (connection) => connection.close().catch(() => {}),
        () => {},
      );
      throw connectError(error);
    }
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
   * retries: the message was not stored in a stream. A message larger than the server's `max_payload` (1 MiB by
   * default) is not sent: the attempt fails with {@link tooLargeForNats}, a refusal that leaves the connection open
   * (docs/decisions/0037-broker-endpoints.md), and is retried on the schedule, since the operator may raise the limit.
   */
  async #publish(message: BrokerMessage, timeoutMs: number): Promise<string> {
    const h = headers();
    for (const [name, value] of Object.entries(message.headers)) h.set(name, value);
    // JetStream's publish sets it again, to the same value: set here, it is counted in the size below.
    h.set(MSG_ID_HEADER, message.id);
    const max = this.#connection.info?.max_payload;
    if (max !== undefined) {
      // What the server counts: the body and the headers as encoded on the wire (`NATS/1.0`, a line each).
      const bytes = Buffer.byteLength(message.body, 'utf8') + Buffer.byteLength(h.toString(), 'utf8');
      if (bytes > max) throw tooLargeForNats(bytes, max);
    }
    try {
      const ack = await withTimeout(
        this.#jetstream.publish(message.subject, message.body, {
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
      this.retire();
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
