import type { BaileysEventMap } from 'baileys';
import type { SessionLock } from '../engine.ts';
import { CLOSE_HANDSHAKE_MS, endSocket, type SocketLike } from './socket.ts';

/** The lifecycle's own listeners on a socket: its connection updates and its credential changes. */
export interface SlotListeners {
  /** Baileys' `connection.update`: QR codes, open, close, the reach-out timelock. */
  connection: (update: BaileysEventMap['connection.update']) => void;
  /** Baileys' `creds.update`: the credentials changed and must be saved. */
  creds: () => void;
}

/** Where a failure to end a socket is reported (debug level: the socket is gone either way). */
interface SlotLogger {
  debug(obj: unknown, msg?: string): void;
}

/**
 * The one socket a lifecycle holds at a time (docs/decisions/0025-live-engine.md: one socket per instance) with
 * everything attached to it: the session's listeners (`attach`, which returns their detach) and the lifecycle's
 * own. Ending the slot detaches them all before the socket ends, so a replaced socket's late events reach nobody.
 */
export class SocketSlot {
  #sock: SocketLike | null = null;
  #detach: (() => void) | null = null;
  #handedOver: Promise<void> = Promise.resolve();
  readonly #logger: SlotLogger;

  constructor(logger: SlotLogger) {
    this.#logger = logger;
  }

  /** The socket held, or null. */
  get current(): SocketLike | null {
    return this.#sock;
  }

  /**
   * Ends the socket held (if any, in the background: {@link end}), then holds `sock`: `attach` wires the session's
   * listeners to it and `listeners` the lifecycle's. Never throws for the socket it ends.
   */
  hold(sock: SocketLike, attach: (sock: SocketLike) => () => void, listeners: SlotListeners): void {
    void this.end();
    this.#sock = sock;
    const detach = attach(sock);
    sock.ev.on('connection.update', listeners.connection);
    sock.ev.on('creds.update', listeners.creds);
    this.#detach = () => {
      detach();
      sock.ev.off('connection.update', listeners.connection);
      sock.ev.off('creds.update', listeners.creds);
    };
  }

  /** Resolves once the last {@link handOver} released its lock (never rejects). */
  get handedOver(): Promise<void> {
    return this.#handedOver;
  }

  /**
   * Ends the socket held, as {@link end}, then releases `lock` once its WebSocket is closed, and once every earlier
   * hand-over's is (docs/decisions/0025-live-engine.md: no socket outlives the one-socket lock). A connect waits for
   * {@link handedOver} before it takes the lock, so that lock is not released under it.
   * @throws the lock's error when releasing it fails.
   */
  handOver(lock: SessionLock, drop = false): Promise<void> {
    const released = Promise.all([this.#handedOver, this.end(drop)]).then(() => lock.release());
    this.#handedOver = released.catch(() => undefined);
    return released;
  }

  /**
   * Detaches every listener at once and ends the socket held ({@link endSocket}): resolves once its WebSocket is
   * closed, within {@link CLOSE_HANDSHAKE_MS} of a peer that does not answer the close frame; with `drop`, at once
   * with no closing handshake (docs/decisions/0025-live-engine.md: the one-socket lock is given up only after).
   * Never rejects: a failure to end it is logged at debug level (the socket is closed either way). Resolves at once
   * when nothing is held.
   */
  end(drop = false): Promise<void> {
    const sock = this.#sock;
    this.#detach?.();
    this.#detach = null;
    this.#sock = null;
    if (!sock) return Promise.resolve();
    return endSocket(sock, drop ? 0 : CLOSE_HANDSHAKE_MS).catch((error: unknown) => {
      this.#logger.debug({ err: error }, 'ending the socket failed');
    });
  }
}
