/**
 * One client WebSocket at /ws/chat: the Noise handshake (noise/handshake.ts), then encrypted frames carrying
 * binary nodes encoded with Baileys' own WABinary encoder/decoder, as Baileys' Socket/socket.js exchanges
 * them (sendNode / onMessageReceived). Stanzas go to the session handler chosen by the client payload:
 * registration (pairing) or login (see server/session.ts).
 *
 * The first frame after the handshake is held back for {@link ConnectionOptions.firstFrameDelayMs}: the
 * platform's server is at least a network round trip away, so a client never sees its answer to the finish
 * sooner, and Baileys 6 relies on that (it switches to its transport keys only after an asynchronous HKDF that
 * it starts once the finish is written; a frame arriving before is dropped undecrypted and the next one fails
 * to authenticate). See docs/decisions/0040-simulator-serves-baileys-6.md.
 */
import { type BinaryNode, decodeBinaryNode, encodeBinaryNode, type proto } from 'baileys';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { DeviceSocket } from '../model/accounts.ts';
import type { CertificateChain } from '../noise/certificates.ts';
import { encodeFrame, FrameReader } from '../noise/framing.ts';
import { NoiseResponder, type TransportCipher } from '../noise/handshake.ts';

/** What a connection hands its stanzas to once the handshake is done. */
export interface StanzaHandler {
  /** Handles one decoded stanza from the client (errors are logged, the connection stays). */
  onStanza(node: BinaryNode): Promise<void>;
  /** Called once when the WebSocket closes, for whatever reason. */
  onClose(): void;
}

/** Builds the stanza handler for a connection whose client finish carried `payload`. */
export type SessionFactory = (
  connection: Connection,
  payload: proto.ClientPayload,
  clientStatic: Buffer,
) => StanzaHandler;

let nextConnectionId = 1;

/**
 * Default of {@link ConnectionOptions.firstFrameDelayMs}, in milliseconds: a typical round trip between a client and
 * the platform (tens of milliseconds to a nearby edge on a good line, more on mobile networks). Baileys 6 derives its
 * transport keys in 0.1 ms on an idle machine, but that HKDF runs on libuv's thread pool: on a 2-core machine with
 * a load average of 5 to 8, one in a thousand took 47 to 104 ms, the slowest 178 ms. There 20 ms lost about one
 * connection in 200, 50 ms and 100 ms none of 500 (docs/decisions/0040-simulator-serves-baileys-6.md).
 */
export const DEFAULT_FIRST_FRAME_DELAY_MS = 100;

/** Timing of a {@link Connection}. */
export interface ConnectionOptions {
  /**
   * Minimum time between the client's Noise finish arriving and the server's first transport frame leaving, in
   * milliseconds (an integer ≥ 0; 0 sends at once). Frames the session sends meanwhile are encrypted in order and
   * held, then sent together; a close asked for meanwhile happens after them. Default
   * {@link DEFAULT_FIRST_FRAME_DELAY_MS}.
   */
  firstFrameDelayMs?: number;
}

/** Time Baileys gives the server to answer a query before giving up; used for server-initiated iqs (ms). */
const REQUEST_TIMEOUT_MS = 20_000;

/** A client connection; implements the fault operations of {@link DeviceSocket}. */
export class Connection implements DeviceSocket {
  readonly id = nextConnectionId++;
  silenced = false;
  /**
   * The client's acknowledgements of the messages sent on this connection (its acks and receipts) are lost on the
   * way (`POST /control/faults` kind `lose-acks`): the messages stay unacknowledged, so when the socket closes they go
   * back to the device's offline queue and are handed over again at its next login, as after a lost ack.
   */
  acksLost = false;
  /**
   * The server's acks of the messages the client sends on this connection are lost on the way (`POST
   * /control/faults` kind `withhold-acks`): each message is taken and delivered, but the client never hears so.
   */
  acksWithheld = false;
  /**
   * How long the server waits before it acks each message the client sends on this connection, ms (`POST
   * /control/faults` kind `slow-acks`); 0 acks at once. An ack due after the connection closed is never sent.
   */
  ackDelayMs = 0;
  private readonly reader = new FrameReader();
  private responder: NoiseResponder | undefined;
  private transport: TransportCipher | undefined;
  private handler: StanzaHandler | undefined;
  private closed = false;
  private nextStanzaId = 1;
  private readonly firstFrameDelayMs: number;
  /** Encrypted frames waiting for the first-frame delay to pass; undefined when frames go out at once. */
  private held: Buffer[] | undefined;
  private holdTimer: NodeJS.Timeout | undefined;
  /** close() was called while frames were held: close the WebSocket once they are sent. */
  private closeWhenReleased = false;
  private readonly pending = new Map<
    string,
    { resolve: (node: BinaryNode) => void; reject: (e: Error) => void }
  >();
  /** Stanzas are processed one at a time, in arrival order, as the platform's server does per socket. */
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly ws: WebSocket,
    private readonly chain: CertificateChain,
    private readonly createSession: SessionFactory,
    readonly log: Logger,
    options: ConnectionOptions = {},
  ) {
    this.firstFrameDelayMs = options.firstFrameDelayMs ?? DEFAULT_FIRST_FRAME_DELAY_MS;
    ws.on('message', (data: Buffer) => this.onData(data));
    ws.on('close', () => {
      this.stopHolding();
      this.onClosed();
    });
    ws.on('error', (err) => this.log.debug({ err, connection: this.id }, 'websocket error'));
  }

  private onData(data: Buffer): void {
    let frames: Buffer[];
    try {
      frames = this.reader.push(data);
    } catch (err) {
      this.log.warn({ err, connection: this.id }, 'bad framing, closing');
      this.drop();
      return;
    }
    for (const frame of frames) {
      this.queue = this.queue
        .then(() => this.onFrame(frame))
        .catch((err: unknown) => {
          this.log.warn({ err, connection: this.id }, 'frame handling failed, closing');
          this.drop();
        });
    }
  }

  private async onFrame(frame: Buffer): Promise<void> {
    if (this.closed) return;
    if (this.transport && this.handler) {
      const node = await decodeBinaryNode(this.transport.decrypt(frame));
      const id = node.attrs.id;
      const waiter =
        id !== undefined && node.tag === 'iq' && (node.attrs.type === 'result' || node.attrs.type === 'error')
          ? this.pending.get(id)
          : undefined;
      if (waiter && id !== undefined) {
        this.pending.delete(id);
        waiter.resolve(node);
        return;
      }
      await this.handler.onStanza(node);
      return;
    }
    if (!this.responder) {
      this.responder = new NoiseResponder(this.chain.serverStatic, this.chain.encoded);
      this.ws.send(encodeFrame(this.responder.serverHello(frame)));
      return;
    }
    const finish = this.responder.finish(frame);
    this.log.debug(
      { connection: this.id, login: !finish.payload.devicePairingData },
      'noise handshake finished',
    );
    this.transport = finish.transport;
    if (this.firstFrameDelayMs > 0) {
      this.held = [];
      this.holdTimer = setTimeout(() => this.release(), this.firstFrameDelayMs);
    }
    this.handler = this.createSession(this, finish.payload, finish.clientStatic);
  }

  /** Sends the frames held since the handshake, in order, then closes when close() was called meanwhile. */
  private release(): void {
    const frames = this.held ?? [];
    this.held = undefined;
    this.holdTimer = undefined;
    for (const frame of frames) this.ws.send(frame);
    if (this.closeWhenReleased) this.ws.close();
  }

  /** Encodes, encrypts and sends one stanza (held during the first-frame delay); a no-op once closed. */
  send(node: BinaryNode): void {
    if (this.closed || !this.transport) return;
    const frame = encodeFrame(this.transport.encrypt(encodeBinaryNode(node)));
    if (this.held) this.held.push(frame);
    else this.ws.send(frame);
  }

  /** Messages sent and not yet acked by the client, by id. */
  private readonly unacked = new Map<string, BinaryNode>();

  /** Sends a message stanza and remembers it until {@link acknowledge} (see DeviceSocket.sendMessage). */
  sendMessage(node: BinaryNode): void {
    if (this.closed) return;
    this.unacked.set(node.attrs.id ?? '', node);
    this.send(node);
  }

  /** The client acked (or sent a receipt for) message `id`. */
  acknowledge(id: string): void {
    if (this.acksLost) return;
    this.unacked.delete(id);
  }

  /** Removes and returns the messages never acked, oldest first. */
  takeUnacked(): BinaryNode[] {
    const nodes = [...this.unacked.values()];
    this.unacked.clear();
    return nodes;
  }

  /** A fresh stanza id for server-initiated stanzas. */
  stanzaId(): string {
    return `sim-${this.id}-${this.nextStanzaId++}`;
  }

  /**
   * Sends an iq and resolves with the client's `result`/`error` iq of the same id. Rejects when the socket
   * closes first or after 20 s.
   */
  request(node: BinaryNode): Promise<BinaryNode> {
    const id = node.attrs.id ?? this.stanzaId();
    node.attrs.id = id;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer to iq ${id} within ${REQUEST_TIMEOUT_MS} ms`));
      }, REQUEST_TIMEOUT_MS);
      this.pending.set(id, {
        resolve: (n) => {
          clearTimeout(timer);
          resolve(n);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.send(node);
    });
  }

  /** `<stream:error code=N/>` then close, as the platform ends a stream (Baileys maps N to DisconnectReason). */
  streamError(code: number): void {
    const content: BinaryNode[] = code === 440 ? [{ tag: 'conflict', attrs: { type: 'replaced' } }] : [];
    this.send({ tag: 'stream:error', attrs: { code: String(code) }, content });
    this.close();
  }

  /** `<failure reason=N/>` then close, the platform's answer to a login it refuses (401: device unlinked). */
  failure(reason: number): void {
    this.send({ tag: 'failure', attrs: { reason: String(reason), location: 'sim' } });
    this.close();
  }

  /** Closes the WebSocket with a normal close frame, after any frames still held by the first-frame delay. */
  close(): void {
    if (this.closed) return;
    if (this.held) this.closeWhenReleased = true;
    else this.ws.close();
    this.onClosed();
  }

  /** Terminates the TCP connection without a close frame, as a network drop (held frames are lost with it). */
  drop(): void {
    this.stopHolding();
    this.ws.terminate();
    this.onClosed();
  }

  private stopHolding(): void {
    clearTimeout(this.holdTimer);
    this.holdTimer = undefined;
    this.held = undefined;
  }

  private onClosed(): void {
    if (this.closed) return;
    this.closed = true;
    for (const waiter of this.pending.values()) waiter.reject(new Error('connection closed'));
    this.pending.clear();
    this.handler?.onClose();
  }
}
