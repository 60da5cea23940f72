import type { BaileysEventMap } from 'baileys';
import type { SocketLike } from './socket.ts';

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
  readonly #logger: SlotLogger;

  constructor(logger: SlotLogger) {
    this.#logger = logger;
  }

  /** The socket held, or null. */
  get current(): SocketLike | null {
    return this.#sock;
  }

  /**
   * Ends the socket held (if any), then holds `sock`: `attach` wires the session's listeners to it and `listeners`
   * the lifecycle's. Never throws for the socket it ends.
   */
  hold(sock: SocketLike, attach: (sock: SocketLike) => () => void, listeners: SlotListeners): void {
    this.end();
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

  /**
   * Detaches every listener and ends the socket held; a failure to end it is logged at debug level, never thrown
   * (Baileys' `end` rejects when the socket already closed). No-op when nothing is held.
   */
  end(): void {
    const sock = this.#sock;
    this.#detach?.();
    this.#detach = null;
    this.#sock = null;
    if (!sock) return;
    sock.end(undefined).catch((error: unknown) => {
      this.#logger.debug({ err: error }, 'ending the socket failed');
    });
  }
}
