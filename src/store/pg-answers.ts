import { connect, type Socket } from 'node:net';
import type pg from 'pg';
import type { Store } from './database.ts';

/**
 * How long a PostgreSQL connection may stay silent while a statement of it waits for its answer before it is closed,
 * ms, unless `DATABASE_ANSWER_TIMEOUT_SECONDS` says otherwise (docs/decisions/0011-store-faults.md, A store that
 * stops answering). Far above what any statement of parley takes outside a migration.
 */
export const ANSWER_TIMEOUT_MS = 30_000;

/** The parts of node-postgres's client this module reaches into: its socket (a TLS socket once upgraded), its
 * server's address and the key of its backend (the BackendKeyData message). */
interface ClientWithSocket {
  connection: { stream: Socket };
  host: string;
  port: number;
  processID: number | null;
  secretKey: number | null;
}

/** How long the cancel request of a silent connection may take to go out, ms (the server may be gone). */
export const CANCEL_REQUEST_TIMEOUT_MS = 5_000;

/** The CancelRequest message's code (PostgreSQL manual, 55.7 Message Formats: 1234 in the high half, 5678 low). */
const CANCEL_REQUEST_CODE = 80877102;

/**
 * Asks the server of `client` to cancel what its backend runs (PostgreSQL manual, 55.2.8 Canceling Requests in
 * Progress): a CancelRequest on a connection of its own, closed once written; best effort, never throws. A client
 * closed while its statement waits on a lock is not noticed by its backend, which would go on waiting and could
 * commit the statement later; cancelled, the statement ends without effect and the backend ends at the closed
 * socket. Through a pooler (PgBouncer) the pooler forwards the request to the backend it lent.
 */
function cancelBackend(client: ClientWithSocket): void {
  if (client.processID === null || client.secretKey === null) return;
  const message = Buffer.alloc(16);
  message.writeInt32BE(16, 0);
  message.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  message.writeInt32BE(client.processID, 8);
  message.writeInt32BE(client.secretKey, 12);
  const socket = client.host.startsWith('/')
    ? connect(`${client.host}/.s.PGSQL.${client.port}`)
    : connect(client.port, client.host);
  socket.setTimeout(CANCEL_REQUEST_TIMEOUT_MS, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.once('connect', () => socket.end(message));
}

/** A generic view of `pg.Client.query`, whose overloads the wrapper passes through untouched. */
type AnyQuery = (...args: unknown[]) => unknown;

/**
 * Closes the PostgreSQL connections that stop answering (docs/decisions/0011-store-faults.md, A store that stops
 * answering). A server whose host went away without closing its connections (a failover to another host, a network
 * cut, a frozen virtual machine) leaves each statement sent on them waiting for an answer until the kernel gives up
 * retransmitting, about 15 minutes on Linux; every connection of the pool ends up held by such a statement, and
 * requests wait or fail long after a new server answers. A connection of this watch that has statements waiting and
 * neither sends nor receives a byte for `timeoutMs` is closed: its statements fail as node-postgres fails them on any
 * broken connection ("Connection terminated"), which the store's fault handling treats as a store that went away
 * (the statement's outcome unknown), and the pool opens a new connection for the next statement.
 *
 * A backend does not notice a client that left while its statement waits on a lock, and would go on waiting (and
 * could still commit it): the closed connection's backend is sent a cancel request as well.
 *
 * The silence is measured on the socket (Node's idle timer, reset by every read and write) and counts only while a
 * statement waits: an idle pooled connection, or one a transaction holds between statements, is never closed by it.
 */
export class AnswerWatch {
  readonly #timeoutMs: number;
  readonly #onSilent: (error: Error) => void;
  #suspended = 0;
  /** The clients this watch closed: their own "connection terminated" error repeats its report. */
  readonly #closed = new WeakSet<pg.Client>();

  /**
   * @param timeoutMs how long a connection with statements waiting may stay silent, ms (0: never closed).
   * @param onSilent told each time a silent connection is closed (the store's connection error report).
   */
  constructor(timeoutMs: number, onSilent: (error: Error) => void) {
    this.#timeoutMs = timeoutMs;
    this.#onSilent = onSilent;
  }

  /**
   * Watches `client` (a connected client of the pool: its socket exists): every `query` call is counted until its
   * answer or failure, and the socket's idle timer runs while any is waiting. No I/O.
   */
  attach(client: pg.Client): void {
    if (this.#timeoutMs <= 0) return;
    const socket = (client as unknown as ClientWithSocket).connection.stream;
    // The class's own `query`, looked up at each call: what wraps it later (a test's fault hook) is kept.
    const prototype = Object.getPrototypeOf(client) as { query: AnyQuery };
    let waiting = 0;
    const answered = (): void => {
      waiting -= 1;
    };
    // Armed once: Node restarts the idle timer at every read and write, and a timeout that finds no statement
    // waiting is an idle connection's (nothing to do; the next write arms the timer again).
    socket.setTimeout(this.#timeoutMs);
    const watch = this;
    (client as unknown as { query: AnyQuery }).query = function watchedQuery(...args: unknown[]): unknown {
      const query = prototype.query;
      if (watch.#suspended > 0) return query.apply(client, args);
      waiting += 1;
      const last = args.length - 1;
      const callback = args[last];
      if (typeof callback === 'function') {
        args[last] = (...results: unknown[]) => {
          answered();
          return (callback as AnyQuery)(...results);
        };
        return query.apply(client, args);
      }
      const result = query.apply(client, args);
      if (result instanceof Promise) result.then(answered, answered);
      else answered();
      return result;
    };
    socket.on('timeout', () => {
      if (waiting === 0) return;
      this.#onSilent(
        new Error(
          `PostgreSQL did not answer for ${this.#timeoutMs} ms while ${waiting} statement(s) waited: connection closed`,
        ),
      );
      this.#closed.add(client);
      socket.destroy();
      cancelBackend(client as unknown as ClientWithSocket);
    });
  }

  /**
   * Whether this watch closed `client` for its silence: its report was made then, so the error the closed
   * connection raises after it (node-postgres's "Connection terminated unexpectedly") need not be reported again.
   */
  closed(client: pg.Client): boolean {
    return this.#closed.has(client);
  }

  /**
   * Leaves the statements sent from now on unwatched until the returned function is called: a migration's may wait
   * for another node's migration (its lock) or build an index for longer than the timeout.
   */
  suspend(): () => void {
    this.#suspended += 1;
    let resumed = false;
    return () => {
      if (resumed) return;
      resumed = true;
      this.#suspended -= 1;
    };
  }
}

/** The answer watches of the open PostgreSQL stores, by store. */
const watches = new WeakMap<Store, AnswerWatch>();

/** Records `watch` as the answer watch of `store`. */
export function useAnswerWatch(store: Store, watch: AnswerWatch): void {
  watches.set(store, watch);
}

/**
 * Leaves `store`'s statements unwatched until the returned function is called ({@link AnswerWatch.suspend}); a
 * store without a watch (SQLite) gets a function that does nothing.
 */
export function suspendAnswerWatch(store: Store): () => void {
  return watches.get(store)?.suspend() ?? (() => undefined);
}
