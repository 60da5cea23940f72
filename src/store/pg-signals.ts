import type { Socket } from 'node:net';
import type pg from 'pg';
import { CONNECT_TIMEOUT_MS } from './database.ts';

/**
 * What the nodes of one store signal each other (docs/decisions/0078-store-signals.md): `events`, the instances
 * whose events a node committed (items: instance ids); `keys`, that an API key was revoked or an organization's
 * plan or limits changed, which the key cache holds with each key (items: key ids, organization ids);
 * `deliveries`, the instances held by another node whose delivery log a node's webhook worker changed (items:
 * instance ids); `instances`, that an organization's instance list in an environment changed (items:
 * `<org id>/<env>`, or `*` for every list, published by the store's triggers on `instances` with no node, so
 * every node hears it:
 * docs/decisions/0088-kept-instance-lists.md).
 */
export type SignalTopic = 'events' | 'keys' | 'deliveries' | 'instances';

/** The topics, in the order they are listened to. */
export const SIGNAL_TOPICS: readonly SignalTopic[] = ['events', 'keys', 'deliveries', 'instances'];

/** A subscriber to one topic: told the items another node published. Must not throw. */
export type SignalListener = (items: readonly string[]) => void;

/**
 * Signals between the nodes (processes) sharing one store (docs/decisions/0078-store-signals.md): a node publishes
 * what it committed, the others are told at once instead of at their next poll. Signals are best effort: one
 * published while the connection is down, or lost with it, is not sent again, so every reader of the store keeps
 * its poll as the guarantee; a signal only shortens the wait. After each (re)connection the gap listeners are
 * called, since signals may have gone by unheard.
 */
export interface StoreSignals {
  /**
   * Tells the other nodes `items` on `topic` (several notifications when they do not fit in one). Never waits and
   * never fails for the store's sake: dropped while not connected, and while {@link MAX_PENDING_PUBLISHES} are
   * unanswered.
   * @throws Error for an item holding a space or over {@link MAX_ITEM_BYTES} bytes (a caller's bug).
   */
  publish(topic: SignalTopic, items: readonly string[]): void;
  /** Calls `listener` with the items of every signal another node publishes on `topic`, until the returned function is called. */
  subscribe(topic: SignalTopic, listener: SignalListener): () => void;
  /** Calls `listener` after every (re)connection (signals may have been missed), until the returned function is called. */
  onGap(listener: () => void): () => void;
  /** Whether the listening connection is up. */
  readonly listening: boolean;
  /** Ends the connection and the retries; idempotent. */
  close(): Promise<void>;
}

/**
 * Items of one topic noted during a turn of the event loop and published together at its end: one notification a
 * turn however many commits or attempts it held, each item once.
 */
export class TurnSignals {
  readonly #signals: StoreSignals;
  readonly #topic: SignalTopic;
  readonly #items = new Set<string>();
  #scheduled = false;

  constructor(signals: StoreSignals, topic: SignalTopic) {
    this.#signals = signals;
    this.#topic = topic;
  }

  /** Notes `item` for this turn's signal. */
  note(item: string): void {
    this.#items.add(item);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      const items = [...this.#items];
      this.#items.clear();
      this.#signals.publish(this.#topic, items);
    });
  }
}

/** The PostgreSQL channel of a topic (`LISTEN parley_events`); shared by every schema of the database. */
export function signalChannel(topic: SignalTopic): string {
  return `parley_${topic}`;
}

/**
 * Longest payload of one notification, bytes: PostgreSQL refuses 8,000 and more (`NOTIFY`, PostgreSQL manual); the
 * rest is margin.
 */
export const MAX_PAYLOAD_BYTES = 7_900;

/** Longest item a signal carries, bytes (an instance or key id is 36). */
export const MAX_ITEM_BYTES = 1_000;

/** Unanswered publishes beyond which new ones are dropped (a server that stopped answering), count. */
export const MAX_PENDING_PUBLISHES = 64;

/** Timing of the listening connection, ms. */
export interface PgSignalsTiming {
  /** First wait before connecting again after a failure; doubled at each failure up to `maxRetryMs` (250). */
  retryMs: number;
  /** Longest wait between two connection attempts (5,000). */
  maxRetryMs: number;
  /** How often an idle connection is checked with a statement (10,000). */
  pingMs: number;
  /**
   * How long that check, or the `LISTEN` that starts a connection, may go unanswered before the connection is closed
   * and opened again (5,000).
   */
  answerTimeoutMs: number;
}

/** The defaults of {@link PgSignalsTiming}. */
export const PG_SIGNALS_TIMING: PgSignalsTiming = {
  retryMs: 250,
  maxRetryMs: 5_000,
  pingMs: 10_000,
  answerTimeoutMs: 5_000,
};

/**
 * The `application_name` of a node's listening connection, what `pg_stat_activity` shows for it: `parley-signals`
 * and the node's id (PostgreSQL keeps 63 bytes of it).
 */
export function signalsApplicationName(nodeId: string): string {
  return `parley-signals ${nodeId}`.slice(0, 63);
}

/**
 * How a schema's name is written in a payload's first field: `%` as `%25`, then a space as `%20` (a PostgreSQL
 * schema may hold spaces when a `DATABASE_URL` sets a quoted `search_path`; the fields are separated by spaces). The
 * store's SQL writes the same (`replace(replace(<schema>, '%', '%25'), ' ', '%20')`, in the key revocation's
 * signal and the instance triggers), so two schemas never share a field (docs/decisions/0078-store-signals.md).
 */
export function signalSchemaField(schema: string): string {
  return schema.replaceAll('%', '%25').replaceAll(' ', '%20');
}

/**
 * A notification's payload: the publisher's schema (as {@link signalSchemaField} writes it) and node id, then the
 * items, separated by single spaces (docs/decisions/0078-store-signals.md). Split into payloads of at most
 * {@link MAX_PAYLOAD_BYTES} bytes.
 * @throws Error when an item holds a space or passes {@link MAX_ITEM_BYTES} (a caller's bug, never a client's input).
 */
export function encodeSignals(schema: string, nodeId: string, items: readonly string[]): string[] {
  const head = `${signalSchemaField(schema)} ${nodeId}`;
  const payloads: string[] = [];
  let current = head;
  let bytes = Buffer.byteLength(head);
  for (const item of items) {
    const size = Buffer.byteLength(item);
    if (size === 0 || size > MAX_ITEM_BYTES || item.includes(' ')) {
      throw new Error(`a signal's item must be 1 to ${MAX_ITEM_BYTES} bytes without spaces`);
    }
    if (current !== head && bytes + 1 + size > MAX_PAYLOAD_BYTES) {
      payloads.push(current);
      current = head;
      bytes = Buffer.byteLength(head);
    }
    current += ` ${item}`;
    bytes += 1 + size;
  }
  if (current !== head) payloads.push(current);
  return payloads;
}

/**
 * The items of `payload` when another node of `schema` published it; undefined for this node's own signals, another
 * schema's and malformed payloads.
 */
export function decodeSignals(payload: string, schema: string, nodeId: string): string[] | undefined {
  const parts = payload.split(' ');
  if (parts.length < 3 || parts[0] !== signalSchemaField(schema) || parts[1] === nodeId) return undefined;
  return parts.slice(2).filter((item) => item !== '');
}

/** The socket under a node-postgres client (to close a connection whose server stopped answering). */
interface ClientWithSocket {
  connection: { stream: Socket };
}

/** The socket under `client`, which node-postgres does not expose in its types. */
function socketOf(client: pg.Client): Socket {
  return (client as unknown as ClientWithSocket).connection.stream;
}

/**
 * {@link StoreSignals} over PostgreSQL's `LISTEN`/`NOTIFY` (docs/decisions/0078-store-signals.md): one connection of
 * its own per node, outside the store's pool (a listening session must stay open), which listens on every topic's
 * channel and publishes with `pg_notify`. It connects in the background, and connects again after any failure
 * (a restart, a terminated backend, a check left unanswered for `answerTimeoutMs`) with a doubling wait; it never
 * throws to its caller and never ends the process.
 */
export class PgSignals implements StoreSignals {
  readonly #url: string;
  readonly #schema: string;
  readonly #nodeId: string;
  readonly #timing: PgSignalsTiming;
  readonly #onError: (error: Error) => void;
  readonly #listeners = new Map<SignalTopic, Set<SignalListener>>();
  readonly #gapListeners = new Set<() => void>();
  #client: pg.Client | undefined;
  #connecting: Promise<void> | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #pingTimer: NodeJS.Timeout | undefined;
  #failures = 0;
  #pending = 0;
  #closed = false;

  /**
   * @param options `url`: the store's PostgreSQL URL; `schema`: the store's schema (signals of other schemas in the
   *   same database are ignored); `nodeId`: this node (its own signals are ignored); `onError`: told each failure
   *   of the connection (a log line).
   */
  constructor(options: {
    url: string;
    schema: string;
    nodeId: string;
    timing?: Partial<PgSignalsTiming>;
    onError: (error: Error) => void;
  }) {
    this.#url = options.url;
    this.#schema = options.schema;
    // The payload's fields are separated by spaces (node ids have none; one given with a space still parses).
    this.#nodeId = options.nodeId.replaceAll(' ', '_');
    const timing = options.timing ?? {};
    this.#timing = {
      retryMs: timing.retryMs ?? PG_SIGNALS_TIMING.retryMs,
      maxRetryMs: timing.maxRetryMs ?? PG_SIGNALS_TIMING.maxRetryMs,
      pingMs: timing.pingMs ?? PG_SIGNALS_TIMING.pingMs,
      answerTimeoutMs: timing.answerTimeoutMs ?? PG_SIGNALS_TIMING.answerTimeoutMs,
    };
    this.#onError = options.onError;
  }

  get listening(): boolean {
    return this.#client !== undefined;
  }

  /** Starts connecting (in the background); resolves once the first attempt succeeded or failed. */
  start(): Promise<void> {
    if (this.#closed || this.#connecting || this.#client) return this.#connecting ?? Promise.resolve();
    this.#connecting = this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  publish(topic: SignalTopic, items: readonly string[]): void {
    const client = this.#client;
    if (client === undefined || items.length === 0) return;
    for (const payload of encodeSignals(this.#schema, this.#nodeId, items)) {
      if (this.#pending >= MAX_PENDING_PUBLISHES) return;
      this.#pending += 1;
      client
        .query('select pg_notify($1, $2)', [signalChannel(topic), payload])
        .catch(() => undefined) // the connection's failure is reported by its 'error' event
        .finally(() => {
          this.#pending -= 1;
        });
    }
  }

  subscribe(topic: SignalTopic, listener: SignalListener): () => void {
    let set = this.#listeners.get(topic);
    if (!set) {
      set = new Set();
      this.#listeners.set(topic, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  onGap(listener: () => void): () => void {
    this.#gapListeners.add(listener);
    return () => {
      this.#gapListeners.delete(listener);
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    await this.#connecting?.catch(() => undefined);
    const client = this.#drop();
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    const { default: pgModule } = await import('pg');
    const client = new pgModule.Client({
      connectionString: this.#url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      application_name: signalsApplicationName(this.#nodeId),
    });
    // An 'error' event with no listener would end the process (Node's EventEmitter rule).
    client.on('error', (error: Error) => this.#lost(client, error));
    client.on('end', () => this.#lost(client, new Error('the signals connection ended')));
    client.on('notification', (message) => this.#heard(message.channel, message.payload));
    try {
      await client.connect();
      // A server that goes silent between the connection and this answer would otherwise hold this attempt (and
      // close(), which waits for it) for ever: its socket is closed after answerTimeoutMs, failing the statement.
      const silent = setTimeout(
        () => socketOf(client).destroy(this.#silence()),
        this.#timing.answerTimeoutMs,
      );
      silent.unref();
      await client
        .query(SIGNAL_TOPICS.map((topic) => `LISTEN ${signalChannel(topic)}`).join('; '))
        .finally(() => clearTimeout(silent));
    } catch (error) {
      await client.end().catch(() => undefined);
      if (!this.#closed) {
        this.#onError(error instanceof Error ? error : new Error(String(error)));
        this.#retryLater();
      }
      return;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    this.#failures = 0;
    this.#schedulePing(client);
    // Whatever was published before this connection listened went by unheard.
    for (const listener of this.#gapListeners) listener();
  }

  #heard(channel: string, payload: string | undefined): void {
    const topic = SIGNAL_TOPICS.find((candidate) => signalChannel(candidate) === channel);
    if (topic === undefined || payload === undefined) return;
    const items = decodeSignals(payload, this.#schema, this.#nodeId);
    if (items === undefined || items.length === 0) return;
    for (const listener of this.#listeners.get(topic) ?? []) listener(items);
  }

  /** The connection of `client` failed or ended: forgets it and connects again (unless closed). */
  #lost(client: pg.Client, error: Error): void {
    if (this.#client !== client) return;
    this.#drop();
    void client.end().catch(() => undefined);
    if (this.#closed) return;
    this.#onError(error);
    this.#retryLater();
  }

  #drop(): pg.Client | undefined {
    const client = this.#client;
    this.#client = undefined;
    clearTimeout(this.#pingTimer);
    this.#pingTimer = undefined;
    return client;
  }

  #retryLater(): void {
    const { retryMs, maxRetryMs } = this.#timing;
    const wait = Math.min(maxRetryMs, retryMs * 2 ** this.#failures);
    this.#failures += 1;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => void this.start(), wait);
    this.#retryTimer.unref();
  }

  /** The failure of a connection that left a statement unanswered for `answerTimeoutMs`. */
  #silence(): Error {
    return new Error(`the signals connection did not answer in ${this.#timing.answerTimeoutMs} ms`);
  }

  /** Checks the idle connection every `pingMs`; one that leaves the check unanswered is closed as lost. */
  #schedulePing(client: pg.Client): void {
    this.#pingTimer = setTimeout(() => {
      if (this.#client !== client) return;
      const silent = setTimeout(() => {
        socketOf(client).destroy();
        this.#lost(client, this.#silence());
      }, this.#timing.answerTimeoutMs);
      silent.unref();
      client
        .query('select 1')
        .then(() => {
          clearTimeout(silent);
          if (this.#client === client) this.#schedulePing(client);
        })
        .catch(() => clearTimeout(silent));
    }, this.#timing.pingMs);
    this.#pingTimer.unref();
  }
}
