import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { type ChannelModel, type ConfirmChannel, connect } from 'amqplib';
import { withTimeout } from '../domain/time-limit.ts';
import { type BrokerConnection, type BrokerMessage, PublishesInFlight } from './connection.ts';
import { BrokerError, openWithin, publishError } from './errors.ts';
import { MIN_PUBLISH_MS } from './publishers.ts';
import type { AmqpTarget } from './urls.ts';

/** AMQP heartbeat asked of the broker, seconds: a dead broker is noticed within about two of these. */
const HEARTBEAT_SECONDS = 15;

/**
 * Header carrying a publish's number on its connection (`1`, `2`, …, as a string), so a message the broker returns
 * is matched to the one publish that sent it (docs/decisions/0037-broker-endpoints.md). The event id and routing
 * key cannot tell them apart: two endpoints of one instance with the same URL publish the same event with both.
 */
export const PUBLISH_HEADER = 'x-parley-publish';

/**
 * RabbitMQ's reason for closing a channel over a message larger than its `max_message_size` (a 406
 * PRECONDITION_FAILED): `message size 2000000 is larger than configured max size 1048576` (`… than max size …` at
 * its ceiling). It counts the message body only.
 */
const OVER_MAX_SIZE = /message size (\d+) is larger than (?:configured )?max size (\d+)/;

/**
 * The error of an event too large for RabbitMQ: `bytes` its body, `max` the `max_message_size` the broker told when it
 * refused a message over it.
 */
function tooLargeForRabbitMq(bytes: number, max: number): BrokerError {
  return new BrokerError(
    `event of ${bytes} bytes is larger than RabbitMQ's max_message_size of ${max} bytes`,
  );
}

/** A confirm channel of the connection, and why RabbitMQ closed it when that was a message over its size limit. */
interface Channel {
  readonly channel: ConfirmChannel;
  /** Set when RabbitMQ closed the channel for a message of `bytes` over its `max_message_size` of `max` bytes. */
  oversize?: { bytes: number; max: number };
}

/**
 * A connection to RabbitMQ with one confirm channel at a time (docs/decisions/0037-broker-endpoints.md). Every
 * message is published persistent (delivery mode 2) and `mandatory` to the endpoint's durable topic exchange, and a
 * publish resolves only on the broker's confirm: a message the broker returned because no queue is bound to its
 * routing key, or nacked, fails the attempt, which the outbox retries. Several lanes may share the connection;
 * publishes on it are confirmed independently. RabbitMQ does not announce its `max_message_size`: it closes the
 * channel for a message over it, telling the limit, which this connection then keeps, opening another channel; a
 * later body over it is sent on a channel of its own, which reads the broker's limit of the moment (a raised one
 * included) and is the only one RabbitMQ closes when the body is still too large; it goes out once the publishes
 * issued before it on the connection's channel ended, and those issued after it wait until it ended (RabbitMQ keeps
 * order per channel only).
 */
export class AmqpConnection implements BrokerConnection {
  readonly #model: ChannelModel;
  #channel: Channel;
  /** Set while a channel RabbitMQ closed for a message's size is being replaced: settles once it was (or failed). */
  #reopening: Promise<void> | undefined;
  readonly #exchange: string;
  /** RabbitMQ's `max_message_size`, bytes, once it refused a message over it (it is not announced). */
  #maxMessageSize: number | undefined;
  /**
   * Publishes waiting for their confirm, by their {@link PUBLISH_HEADER} number: `returned` is set when the broker
   * returns that message (a return comes before the message's confirm: RabbitMQ's publisher confirms documentation,
   * https://www.rabbitmq.com/docs/confirms).
   */
  readonly #pending = new Map<string, { returned: boolean }>();
  /** Number of the last publish on this connection. */
  #published = 0;
  /** Publishes issued on the connection's channel so far: each one's number in that order (1, 2, …). */
  #channelIssued = 0;
  /** Publishes on the connection's channel not ended yet (confirmed, refused or failed). */
  #channelInFlight = 0;
  /**
   * Events sent on a channel of their own waiting for the publishes issued before them on the connection's channel
   * ({@link #channelDrained}): `upTo` the number of the last of those, `left` how many of them have not ended. Kept
   * apart from the publishes so that a publish on the channel, the common case, allocates nothing to be tracked.
   */
  #channelWaiters: { upTo: number; left: number; resolve: () => void }[] = [];
  /** Settles once the publishes sent on channels of their own so far have ended; unset when none is. */
  #alone: Promise<void> | undefined;
  readonly #inFlight = new PublishesInFlight(() => this.close());
  #closed = false;

  private constructor(model: ChannelModel, channel: ConfirmChannel, exchange: string) {
    this.#model = model;
    this.#channel = this.#watch(channel);
    this.#exchange = exchange;
    const end = () => {
      this.#closed = true;
    };
    model.on('close', end);
    model.on('error', end);
  }

  /**
   * Listens to `channel`'s returns and its end. A channel RabbitMQ closed for a message over its `max_message_size`
   * is replaced by a new one on the same connection, the limit kept; any other end of the current channel ends the
   * connection (it is replaced at the next attempt).
   */
  #watch(channel: ConfirmChannel): Channel {
    const watched: Channel = { channel };
    let oversize: { bytes: number; max: number } | undefined;
    channel.on('error', (error: unknown) => {
      const match = error instanceof Error ? OVER_MAX_SIZE.exec(error.message) : null;
      if (match !== null) oversize = { bytes: Number(match[1]), max: Number(match[2]) };
    });
    channel.on('close', () => {
      // amqplib has failed the channel's unconfirmed publishes already; they read `oversize` once they resume.
      watched.oversize = oversize;
      if (this.#channel !== watched) return;
      if (oversize === undefined || this.#closed) {
        this.#closed = true;
        return;
      }
      this.#maxMessageSize = oversize.max;
      this.#reopening = this.#model.createConfirmChannel().then(
        (next) => {
          this.#channel = this.#watch(next);
        },
        () => {
          this.#closed = true;
        },
      );
      const reopening = this.#reopening;
      void reopening.finally(() => {
        if (this.#reopening === reopening) this.#reopening = undefined;
      });
    });
    channel.on('return', (message) => this.#returned(message));
    return watched;
  }

  /**
   * Connects to `address` (a checked address of `target.hostname`; TLS still verifies the certificate against the
   * host name), opens a confirm channel and declares the exchange (durable, topic) unless it is one of RabbitMQ's own
   * `amq.` exchanges, which is only checked to exist.
   * @param timeoutMs time allowed for all of it, milliseconds.
   * @throws BrokerError `could not connect to the broker (ECONNREFUSED)`, `the broker refused the connection: …`
   *   (login, vhost, an exchange of another type), or a timeout.
   */
  static async open(target: AmqpTarget, address: string, timeoutMs: number): Promise<AmqpConnection> {
    let model: ChannelModel | undefined;
    const opening = (async () => {
      model = await connect(
        {
          protocol: target.tls ? 'amqps' : 'amqp',
          hostname: address,
          port: target.port,
          username: target.username,
          password: target.password,
          vhost: target.vhost,
          heartbeat: HEARTBEAT_SECONDS,
        },
        {
          timeout: timeoutMs,
          noDelay: true,
          ...(target.tls && isIP(target.hostname) === 0 ? { servername: target.hostname } : {}),
        },
      );
      // An error event with no listener would throw: the connection's end is seen through `closed`.
      model.on('error', () => {});
      const channel = await model.createConfirmChannel();
      channel.on('error', () => {});
      if (target.exchange.startsWith('amq.')) await channel.checkExchange(target.exchange);
      else await channel.assertExchange(target.exchange, 'topic', { durable: true });
      return new AmqpConnection(model, channel, target.exchange);
    })();
    return openWithin(
      opening,
      timeoutMs,
      (connection) => connection.close(),
      async () => model?.close(),
    );
  }

  get closed(): boolean {
    return this.#closed || this.#inFlight.retiring;
  }

  retire(): void {
    this.#inFlight.retire();
  }

  async publish(message: BrokerMessage, timeoutMs: number): Promise<string> {
    if (this.closed) throw new BrokerError('the connection to the broker was closed');
    return this.#inFlight.run(() => this.#publish(message, timeoutMs));
  }

  /**
   * One confirmed publish. A body larger than the `max_message_size` RabbitMQ told on this connection is not sent on
   * the connection's channel, which RabbitMQ would close for it (failing the other publishes in flight on it): it
   * goes on a channel of its own ({@link #publishAlone}), which reads the broker's limit as it opens, so a limit
   * raised since is honoured at the next attempt (docs/decisions/0037-broker-endpoints.md "Message size"). RabbitMQ
   * keeps order per channel only: such an event goes out once the publishes issued before it on the connection's
   * channel ended, and those issued after it wait until it ended (each within its own time limit), so a lane's events
   * are queued in the order issued. The message RabbitMQ closes the channel for fails with
   * {@link tooLargeForRabbitMq}; the publishes in flight on that channel fail as unanswered (`the connection to the
   * broker ended before it answered: RabbitMQ closed the channel for another message …`), and the connection
   * publishes on, on a new channel.
   */
  #publish(message: BrokerMessage, timeoutMs: number): Promise<string> {
    const body = Buffer.from(message.body, 'utf8');
    const started = performance.now();
    // Read before any wait, so the publishes issued after this one see it (a limit told on this connection is set
    // with the new channel's opening, which a publish waits for below).
    const before = this.#alone;
    const max = this.#maxMessageSize;
    if (max !== undefined && body.length > max) {
      const earlier = this.#channelDrained();
      const alone = this.#after(before, timeoutMs, started)
        .then(() => this.#after(earlier, timeoutMs, started))
        .then(() => this.#publishAlone(message, body, timeoutMs, started));
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
    this.#channelIssued += 1;
    this.#channelInFlight += 1;
    return this.#publishOnChannel(message, body, timeoutMs, started, before, this.#channelIssued);
  }

  /**
   * Settles (never rejects) once the publishes issued on the connection's channel so far have ended; undefined when
   * none is in flight. Those issued later are not waited for.
   */
  #channelDrained(): Promise<void> | undefined {
    if (this.#channelInFlight === 0) return undefined;
    const upTo = this.#channelIssued;
    const left = this.#channelInFlight;
    return new Promise<void>((resolve) => {
      this.#channelWaiters.push({ upTo, left, resolve });
    });
  }

  /** Counts publish number `issued` on the connection's channel as ended, and lets go of who waited for it. */
  #channelEnded(issued: number): void {
    this.#channelInFlight -= 1;
    if (this.#channelWaiters.length === 0) return;
    for (const waiter of this.#channelWaiters) {
      if (issued <= waiter.upTo) {
        waiter.left -= 1;
        if (waiter.left === 0) waiter.resolve();
      }
    }
    this.#channelWaiters = this.#channelWaiters.filter((waiter) => waiter.left > 0);
  }

  /**
   * Waits for `work` (which never rejects), at most until {@link MIN_PUBLISH_MS} before the end of `timeoutMs` since
   * `started`: a message is not sent with a time limit it cannot meet (its retry would publish it again).
   * @throws BrokerError `the broker did not answer within <timeoutMs> ms`, nothing sent.
   */
  async #after(work: Promise<void> | undefined, timeoutMs: number, started: number): Promise<void> {
    if (work === undefined) return;
    await withTimeout(
      work,
      Math.max(0, Math.round(timeoutMs - (performance.now() - started) - MIN_PUBLISH_MS)),
      () => new BrokerError(`the broker did not answer within ${timeoutMs} ms`),
    );
  }

  /**
   * Publishes `body` on the connection's channel once a channel RabbitMQ closed for a message's size was replaced
   * and `alone` (the publishes on channels of their own issued before this one) ended; `issued` is its number among
   * the channel's publishes, counted as ended ({@link #channelEnded}) whichever way it ends.
   * @throws BrokerError as {@link #publish} does.
   */
  async #publishOnChannel(
    message: BrokerMessage,
    body: Buffer,
    timeoutMs: number,
    started: number,
    alone: Promise<void> | undefined,
    issued: number,
  ): Promise<string> {
    try {
      if (this.#reopening !== undefined) {
        try {
          await withTimeout(
            this.#reopening,
            timeoutMs,
            () => new BrokerError(`the broker did not open a new channel within ${timeoutMs} ms`),
          );
        } catch (error) {
          // Nothing was sent; a connection that cannot open a channel is replaced.
          this.retire();
          throw error;
        }
        if (this.#closed) throw new BrokerError('the connection to the broker was closed');
      }
      // Without a wait, the message is sent before this returns, as the publishes issued before it were.
      if (alone !== undefined) await this.#after(alone, timeoutMs, started);
      const channel = this.#channel;
      try {
        await this.#confirm(channel.channel, message, body, timeoutMs, started);
      } catch (error) {
        const oversize = channel.oversize;
        if (oversize !== undefined) {
          // RabbitMQ closed the channel for a message's size: this one's, or another's ahead of it, dropping this one
          // (or leaving its confirm unsaid). The connection is fine.
          if (body.length > oversize.max) throw tooLargeForRabbitMq(body.length, oversize.max);
          throw new BrokerError(
            `the connection to the broker ended before it answered: RabbitMQ closed the channel for another message of ${oversize.bytes} bytes, over its max_message_size of ${oversize.max} bytes`,
            { cause: error },
          );
        }
        // Nothing more can be told of a message that was neither confirmed nor refused: start afresh, once the other
        // lanes' publishes on this connection have had their answers.
        if (!(error instanceof BrokerError && error.message.startsWith('the broker refused'))) this.retire();
        throw error instanceof BrokerError ? error : publishError(error);
      }
      return `confirmed by RabbitMQ (exchange ${this.#exchange})`;
    } finally {
      this.#channelEnded(issued);
    }
  }

  /**
   * Publishes `body`, larger than the limit RabbitMQ told on this connection, on a confirm channel of its own, closed
   * afterwards. RabbitMQ reads its `max_message_size` when a channel opens, so this channel holds the broker's limit
   * of now, raised or not: a body within it is confirmed; one over it closes this channel only, the attempt failing
   * with {@link tooLargeForRabbitMq} and the limit it told, and the connection's channel goes on undisturbed.
   * @param started when the attempt began (`performance.now()`), so the whole attempt keeps within `timeoutMs`.
   * @throws BrokerError as {@link #publish} does.
   */
  async #publishAlone(
    message: BrokerMessage,
    body: Buffer,
    timeoutMs: number,
    started: number,
  ): Promise<string> {
    const opening = this.#model.createConfirmChannel();
    let channel: ConfirmChannel;
    try {
      channel = await withTimeout(
        opening,
        Math.max(1, Math.round(timeoutMs - (performance.now() - started))),
        () => new BrokerError(`the broker did not open a new channel within ${timeoutMs} ms`),
      );
    } catch (error) {
      // Nothing was sent; a connection that cannot open a channel is replaced.
      opening.then(
        (late) => late.close().catch(() => {}),
        () => {},
      );
      this.retire();
      throw error instanceof BrokerError ? error : publishError(error);
    }
    let oversize: { bytes: number; max: number } | undefined;
    let ended = false;
    channel.on('error', (error: unknown) => {
      // Emitted before the channel's unconfirmed publishes are failed (amqplib), so they find it set.
      const match = error instanceof Error ? OVER_MAX_SIZE.exec(error.message) : null;
      if (match !== null) oversize = { bytes: Number(match[1]), max: Number(match[2]) };
    });
    channel.on('close', () => {
      ended = true;
    });
    channel.on('return', (returned) => this.#returned(returned));
    try {
      await this.#confirm(channel, message, body, timeoutMs, started);
    } catch (error) {
      if (oversize !== undefined) throw tooLargeForRabbitMq(body.length, oversize.max);
      if (!(error instanceof BrokerError && error.message.startsWith('the broker refused'))) this.retire();
      throw error instanceof BrokerError ? error : publishError(error);
    } finally {
      // Closed without waiting for RabbitMQ's answer: the outcome is known, and the publishes issued after this one
      // wait for it to end. amqplib never settles a channel's close whose connection ends before the broker answered
      // it (a broker restart): awaiting it held this publish for ever, and each one issued after it for its whole
      // time limit (docs/decisions/0037-broker-endpoints.md "Message size").
      if (!ended) void channel.close().catch(() => {});
    }
    return `confirmed by RabbitMQ (exchange ${this.#exchange})`;
  }

  /**
   * Publishes `body` on `channel` (persistent, `mandatory`, numbered by {@link PUBLISH_HEADER}) and waits for its
   * confirm, within what is left of `timeoutMs` since `started` (`performance.now()`).
   * @throws BrokerError when the broker nacks it (`the broker refused …`), returns it (no queue bound), or does not
   *   confirm it in time; amqplib's error when the channel ends first.
   */
  async #confirm(
    channel: ConfirmChannel,
    message: BrokerMessage,
    body: Buffer,
    timeoutMs: number,
    started: number,
  ): Promise<void> {
    const left = Math.max(1, Math.round(timeoutMs - (performance.now() - started)));
    this.#published += 1;
    const publish = String(this.#published);
    const pending = { returned: false };
    this.#pending.set(publish, pending);
    const confirmed = new Promise<void>((resolve, reject) => {
      try {
        channel.publish(
          this.#exchange,
          message.subject,
          body,
          {
            persistent: true,
            mandatory: true,
            messageId: message.id,
            type: message.type,
            contentType: 'application/json',
            contentEncoding: 'utf-8',
            timestamp: message.timestampSeconds,
            appId: 'parley',
            headers: { ...message.headers, [PUBLISH_HEADER]: publish },
          },
          (error) => (error ? reject(publishError(error)) : resolve()),
        );
      } catch (error) {
        reject(publishError(error));
      }
    });
    try {
      await withTimeout(
        confirmed,
        left,
        () => new BrokerError(`the broker did not confirm the message within ${timeoutMs} ms`),
      );
    } finally {
      this.#pending.delete(publish);
    }
    if (pending.returned) {
      throw new BrokerError(
        `no queue is bound to routing key ${message.subject} on exchange ${this.#exchange}: the broker returned the message`,
      );
    }
  }

  /** Marks the publish a message the broker returned names ({@link PUBLISH_HEADER}) as returned. */
  #returned(message: { properties: { headers?: Record<string, unknown> } }): void {
    const publish = headerText(message.properties.headers?.[PUBLISH_HEADER]);
    const pending = publish === undefined ? undefined : this.#pending.get(publish);
    if (pending !== undefined) pending.returned = true;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#model.close().catch(() => {});
  }
}

/** A header value as text: amqplib hands back a string header as a string or, from some brokers, a Buffer. */
function headerText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return undefined;
}
