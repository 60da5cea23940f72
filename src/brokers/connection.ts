/** What a broker connection publishes and promises (docs/decisions/0037-broker-endpoints.md). */

/** One event as published to a broker. */
export interface BrokerMessage {
  /** The event id: AMQP `message-id`, NATS `Nats-Msg-Id` (JetStream's deduplication key), and `webhook-id`. */
  id: string;
  /** Routing key or subject, `parley.<instanceId>.<Type>`. */
  subject: string;
  /** The event's type (AMQP `type`). */
  type: string;
  /** The exact body text, the same bytes a webhook receives. */
  body: string;
  /** Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and `content-type`. */
  headers: Record<string, string>;
  /** Unix seconds of this attempt (AMQP `timestamp`). */
  timestampSeconds: number;
}

/** An open connection to one broker endpoint's broker. */
export interface BrokerConnection {
  /**
   * Publishes `message` and resolves once the broker has taken responsibility for it (RabbitMQ: publisher confirm
   * of a persistent, routed message; NATS: the JetStream acknowledgement), within `timeoutMs` milliseconds.
   * @returns a short receipt for the delivery log (`confirmed by RabbitMQ (exchange parley)`, `stored in JetStream
   *   stream PARLEY as message 12`).
   * @throws BrokerError (./errors.ts) with a message safe to show.
   */
  publish(message: BrokerMessage, timeoutMs: number): Promise<string>;
  /** True once the connection has ended (closed by either side or failed) or was retired: it is then replaced. */
  readonly closed: boolean;
  /**
   * Takes no new publish (`closed` reads true) and closes the connection once the publishes in flight on it have
   * ended, each within its own time limit: a connection shared by several lanes is replaced without failing the
   * others' publishes, whose confirms may still come. Never throws.
   */
  retire(): void;
  /** Closes the connection now, failing what is in flight on it; never throws. */
  close(): Promise<void>;
}

/**
 * Counts a connection's publishes in flight and closes it, once {@link retire}d, when the last one has ended
 * (`BrokerConnection.retire`).
 */
export class PublishesInFlight {
  #count = 0;
  #retiring = false;
  readonly #close: () => Promise<void>;

  /** `close` closes the connection; it is called at most once from here, and its failure is ignored. */
  constructor(close: () => Promise<void>) {
    this.#close = close;
  }

  /** True once {@link retire} was called. */
  get retiring(): boolean {
    return this.#retiring;
  }

  /** Runs one publish (`work` is called at once, so it is issued in call order) and counts it until it ends. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    this.#count += 1;
    try {
      return await work();
    } finally {
      this.#count -= 1;
      if (this.#retiring && this.#count === 0) void this.#close().catch(() => {});
    }
  }

  /** No new publish from now on; closes at once when none is in flight, else when the last one ends. */
  retire(): void {
    if (this.#retiring) return;
    this.#retiring = true;
    if (this.#count === 0) void this.#close().catch(() => {});
  }
}
