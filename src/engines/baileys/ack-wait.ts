import type { BinaryNode, ConnectionState } from 'baileys';
import { type EngineSessionContext, UnconfirmedRelayError } from '../engine.ts';
import { connectionLost } from './errors.ts';
import { dropSocket, type SocketLike } from './socket.ts';

/**
 * What runs when each socket closes, for the relays waiting for an ack on it ({@link whenClosed}): one
 * `connection.update` listener per socket however many relays wait, so many waits never pass the emitter's
 * listener warning.
 */
const closeWatchers = new WeakMap<SocketLike, Set<() => void>>();

/** Runs `callback` once when `sock` closes (Baileys' `connection.update` `close`). @returns what stops that. */
function whenClosed(sock: SocketLike, callback: () => void): () => void {
  let watchers = closeWatchers.get(sock);
  if (watchers === undefined) {
    const set = new Set<() => void>();
    watchers = set;
    closeWatchers.set(sock, set);
    sock.ev.on('connection.update', (update: Partial<ConnectionState>) => {
      if (update.connection !== 'close') return;
      const waiting = [...set];
      set.clear();
      for (const watcher of waiting) watcher();
    });
  }
  const added = watchers;
  added.add(callback);
  return () => {
    added.delete(callback);
  };
}

/** The wait for the server's ack of one relayed message ({@link waitForAck}). */
export interface AckWait {
  /**
   * Resolves with the ack; rejects with {@link UnconfirmedRelayError} when the socket closes first or the timer set
   * by {@link arm} runs out. Marked handled: a rejection while the relay runs is not an unhandled one.
   */
  done: Promise<BinaryNode>;
  /**
   * Starts the timer, `timeoutMs` ms, once the relay returned; a no-op when the wait is over already (an ack can
   * come before the relay returns: Baileys writes the stanza, then commits its Signal keys to the store).
   */
  arm(timeoutMs: number): void;
  /** Stops the wait (the relay itself failed): `done` then never settles. */
  cancel(): void;
}

/**
 * Waits for the server's `<ack>` of message `id` (Baileys emits every stanza as `TAG:<id>` on the socket); register
 * before relaying, arm once the relay returned. A missing ack is never a success: the message may not have reached
 * the platform (docs/decisions/0009-sends-as-jobs.md). The wait fails with {@link UnconfirmedRelayError} when the
 * socket closes before the ack, or when none arrived within the armed time: a connection silent that long is taken
 * for dead (nothing arrives, nothing closes) and dropped at once ({@link dropSocket}, Baileys' 408 as its keep-alive
 * ends one), so the reconnect starts now rather than at the keep-alive's next check or after a closing handshake.
 * What already reached the socket is read before that judgement: when the timer comes due the wait lets the event
 * loop read its sockets once (Node runs due timers before it polls, so a process busy past the wait finds its
 * timer due with the ack unread), and an ack read then counts (docs/decisions/0025-live-engine.md).
 */
export function waitForAck(sock: SocketLike, id: string, logger: EngineSessionContext['logger']): AckWait {
  let over = false;
  let stop: () => void = () => undefined;
  let fail: (why: string) => void = () => undefined;
  let timer: NodeJS.Timeout | undefined;
  const event = `TAG:${id}`;
  const done = new Promise<BinaryNode>((resolve, reject) => {
    const onFrame = (node: BinaryNode) => {
      if (node.tag !== 'ack') return;
      stop();
      resolve(node);
    };
    fail = (why) => {
      stop();
      reject(new UnconfirmedRelayError(id, why));
    };
    const unwatch = whenClosed(sock, () => fail('the connection closed before the platform acknowledged it'));
    stop = () => {
      over = true;
      clearTimeout(timer);
      sock.ws.off(event, onFrame);
      unwatch();
    };
    sock.ws.on(event, onFrame);
  });
  done.catch(() => undefined);
  const judge = (timeoutMs: number) => {
    if (over) return;
    const seconds = timeoutMs / 1000;
    logger.warn({ id, timeoutMs }, 'no ack for a relayed message: dropping the connection as lost');
    fail(`no ack within ${seconds} s; the connection is renewed`);
    dropSocket(sock, connectionLost(`no ack for message ${id} within ${seconds} s`)).catch(
      (error: unknown) => {
        logger.debug({ err: error }, 'ending the connection failed');
      },
    );
  };
  const arm = (timeoutMs: number) => {
    if (over) return;
    // The timer's callback runs before the poll phase of its loop turn; setImmediate runs after it.
    timer = setTimeout(() => setImmediate(() => judge(timeoutMs)), timeoutMs);
  };
  return { done, arm, cancel: () => stop() };
}
