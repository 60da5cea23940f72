import { isIP } from 'node:net';
import { type ChannelModel, type ConfirmChannel, connect } from 'amqplib';
import { withTimeout } from '../domain/time-limit.ts';
import { type BrokerConnection, type BrokerMessage, PublishesInFlight } from './connection.ts';
import { BrokerError, connectError, publishError } from './errors.ts';
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
 * A connection to RabbitMQ with one confirm channel (docs/decisions/0037-broker-endpoints.md). Every message is
 * published persistent (delivery mode 2) and `mandatory` to the endpoint's durable topic exchange, and a publish
 * resolves only on the broker's confirm: a message the broker returned because no queue is bound to its routing key,
 * or nacked, fails the attempt, which the outbox retries. Several lanes may share the connection; publishes on it
 * are confirmed independently.
 */
export class AmqpConnection implements BrokerConnection {
  readonly #model: ChannelModel;
  readonly #channel: ConfirmChannel;
  readonly #exchange: string;
  /**
   * Publishes waiting for their confirm, by their {@link PUBLISH_HEADER} number: `returned` is set when the broker
   * returns that message (a return comes before the message's confirm: RabbitMQ's publisher confirms documentation,
   * https://www.rabbitmq.com/docs/confirms).
   */
  readonly #pending = new Map<string, { returned: boolean }>();
  /** Number of the last publish on this connection. */
  #published = 0;
  readonly #inFlight = new PublishesInFlight(() => this.close());
  #closed = false;

  private constructor(model: ChannelModel, channel: ConfirmChannel, exchange: string) {
    this.#model = model;
    this.#channel = channel;
    this.#exchange = exchange;
    const end = () => {
      this.#closed = true;
    };
    model.on('close', end);
    model.on('error', end);
    channel.on('close', end);
    channel.on('error', end);
    channel.on('return', (message) => {
      const publish = headerText(message.properties.headers?.[PUBLISH_HEADER]);
      const pending = publish === undefined ? undefined : this.#pending.get(publish);
      if (pending !== undefined) pending.returned = true;
    });
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
    try {
      return await withTimeout(
        opening,
        timeoutMs,
        () => new BrokerError(`connecting to the broker timed out after ${timeoutMs} ms`),
      );
    } catch (error) {
      opening.then(
        (connection) => connection.close(),
        () => model?.close().catch(() => {}),
      );
      throw connectError(error);
    }
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

  async #publish(message: BrokerMessage, timeoutMs: number): Promise<string> {
    this.#published += 1;
    const publish = String(this.#published);
    const pending = { returned: false };
    this.#pending.set(publish, pending);
    const confirmed = new Promise<void>((resolve, reject) => {
      try {
        this.#channel.publish(
          this.#exchange,
          message.subject,
          Buffer.from(message.body, 'utf8'),
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
        timeoutMs,
        () => new BrokerError(`the broker did not confirm the message within ${timeoutMs} ms`),
      );
    } catch (error) {
      // Nothing more can be told of a message that was neither confirmed nor refused: start afresh, once the other
      // lanes' publishes on this connection have had their answers.
      if (!(error instanceof BrokerError && error.message.startsWith('the broker refused'))) this.retire();
      throw error instanceof BrokerError ? error : publishError(error);
    } finally {
      this.#pending.delete(publish);
    }
    if (pending.returned) {
      throw new BrokerError(
        `no queue is bound to routing key ${message.subject} on exchange ${this.#exchange}: the broker returned the message`,
      );
    }
    return `confirmed by RabbitMQ (exchange ${this.#exchange})`;
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
