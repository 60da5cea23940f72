import makeWASocket, {
  type Contact as BaileysContact,
  type BaileysEventMap,
  type BinaryNode,
  type UserFacingSocketConfig,
  type WASocket,
} from 'baileys';
import { withKeyedStorages } from './keyed-storage.ts';

/** The logger Baileys takes (`ILogger`): pino-compatible; parley passes a child of the session's logger. */
export interface BaileysLogger {
  level: string;
  child(bindings: Record<string, unknown>): BaileysLogger;
  trace(obj: unknown, msg?: string): void;
  debug(obj: unknown, msg?: string): void;
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

/** The event side of a Baileys socket (`BaileysEventEmitter`, subset). */
export interface SocketEvents {
  on<E extends keyof BaileysEventMap>(event: E, listener: (arg: BaileysEventMap[E]) => void): void;
  off<E extends keyof BaileysEventMap>(event: E, listener: (arg: BaileysEventMap[E]) => void): void;
}

/**
 * The raw frame side of a Baileys socket (`WebSocketClient`): Baileys emits every decoded stanza as
 * `CB:<tag>,…` and `TAG:<id>`; parley reads `CB:chatstate` (typing) and `TAG:<message id>` (server acks) here.
 */
export interface SocketFrames {
  on(event: string, listener: (node: BinaryNode) => void): unknown;
  off(event: string, listener: (node: BinaryNode) => void): unknown;
}

/**
 * Everything the live engine uses of a Baileys 7 socket (`ReturnType<typeof makeWASocket>`). Narrow on purpose:
 * tests implement it with a fake (docs/decisions/0025-live-engine.md: close codes and the lock are tested with a fake
 * socket).
 */
export interface SocketLike
  extends Pick<
    WASocket,
    | 'relayMessage'
    | 'waUploadToServer'
    | 'readMessages'
    | 'executeUSyncQuery'
    | 'groupCreate'
    | 'groupFetchAllParticipating'
    | 'groupMetadata'
    | 'groupInviteCode'
    | 'groupParticipantsUpdate'
    | 'groupUpdateSubject'
    | 'groupUpdateDescription'
    | 'groupSettingUpdate'
    | 'groupToggleEphemeral'
    | 'groupLeave'
    | 'groupAcceptInvite'
    | 'groupRevokeInvite'
    | 'presenceSubscribe'
    | 'sendPresenceUpdate'
    | 'query'
    | 'requestPairingCode'
    | 'waitForSocketOpen'
    | 'logout'
    | 'end'
    | 'fetchAccountReachoutTimelock'
    | 'rejectCall'
    | 'fetchPrivacySettings'
    | 'updateLastSeenPrivacy'
    | 'updateOnlinePrivacy'
    | 'updateProfilePicturePrivacy'
    | 'updateStatusPrivacy'
    | 'updateGroupsAddPrivacy'
    | 'updateReadReceiptsPrivacy'
    | 'fetchBlocklist'
    | 'updateBlockStatus'
    | 'updateProfileName'
    | 'updateProfileStatus'
    | 'updateProfilePicture'
    | 'newsletterMetadata'
    | 'newsletterFollow'
    | 'newsletterUnfollow'
    | 'chatModify'
    | 'getBusinessProfile'
    | 'sendNode'
  > {
  ev: SocketEvents;
  ws: SocketFrames;
  /** The logged-in account (`creds.me`), when known. */
  readonly user: BaileysContact | undefined;
  /**
   * Baileys' LID mapping store (Signal/lid-mapping.js): LID → phone for payloads (jid.ts), phone → LID for the
   * relay address of 1:1 sends (addressing.ts; may run a usync `lid` query when the store does not know it).
   */
  signalRepository: {
    lidMapping: {
      getPNForLID(lid: string): Promise<string | null>;
      getLIDForPN(pn: string): Promise<string | null>;
    };
  };
}

/** Creates a socket from a Baileys config; the default is Baileys' `makeWASocket`. Tests inject fakes. */
export type SocketFactory = (config: UserFacingSocketConfig) => SocketLike;

/**
 * How long a closing handshake may take before the WebSocket is destroyed, ms (docs/decisions/0025-live-engine.md:
 * a close is bounded). A healthy peer answers a close frame within a round trip; a dead one never does, and the `ws`
 * library would wait 30 s for it.
 */
export const CLOSE_HANDSHAKE_MS = 2_000;

/**
 * The production {@link SocketFactory}: Baileys' real `makeWASocket` (it connects immediately), its per-socket
 * key-transaction storage made a keyed view of one process-wide storage ({@link withKeyedStorages}), so a
 * process that opens many sockets does not slow every promise by the number of sockets it ever opened; every close
 * of its client bounded to {@link CLOSE_HANDSHAKE_MS} ({@link boundCloseHandshake}).
 */
export const makeBaileysSocket: SocketFactory = (config) => {
  const sock = withKeyedStorages(() => makeWASocket(config));
  boundCloseHandshake(sock.ws, CLOSE_HANDSHAKE_MS);
  return sock;
};

/** The closing side of Baileys' WebSocket client (Socket/Client/websocket.js `WebSocketClient`). */
export interface ClosingClient {
  /** Sends a close frame on the WebSocket it keeps in `socket` and resolves once that WebSocket closed. */
  close(): Promise<void>;
}

/**
 * Bounds every close of Baileys' client `client` to `ms` milliseconds (docs/decisions/0025-live-engine.md): a close
 * frame the peer has not answered by then has its WebSocket destroyed (`ws` `terminate`), which ends the close.
 * Baileys' `end` closes the client this way whoever ends the connection, its keep-alive (nothing received for the
 * interval plus 5 s: 408) as much as parley, and `ws` destroys a socket whose peer never answers only after 30 s:
 * a dead connection stayed reported open that long after Baileys had judged it lost. A healthy peer answers within
 * a round trip, so a logout or a graceful shutdown still ends with a clean closing handshake.
 */
export function boundCloseHandshake(client: ClosingClient, ms: number): void {
  const close = client.close.bind(client);
  client.close = async () => {
    // Read first: the client forgets its WebSocket once closed.
    const raw = webSocketOf(client);
    const closing = close();
    if (raw !== undefined) await closedWithin(raw, ms);
    await closing;
  };
}

/**
 * Ends `sock` on parley's behalf (a disconnect, a logout, a shutdown, a lost lock) and resolves once the WebSocket
 * under it is closed, so no socket outlives its session by more than `ms` milliseconds
 * (docs/decisions/0025-live-engine.md: the one-socket lock is given up only then): Baileys' `end` sends a close frame,
 * and a peer that has not answered it within `ms` has its WebSocket destroyed; with `ms` 0 it is destroyed at once,
 * with no closing handshake. It also waits for a close that was already under way (Baileys' keep-alive's, or its
 * logout's), where Baileys' `end` returns at once. An `end` that fails has the WebSocket destroyed at once. A socket
 * without a WebSocket (a test's fake) resolves with its `end`.
 * @throws Baileys' `end`'s error, once the WebSocket is closed.
 */
export async function endSocket(sock: SocketLike, ms: number): Promise<void> {
  const raw = webSocketOf(sock.ws);
  if (raw !== undefined && ms <= 0) raw.terminate();
  const ending = sock.end(undefined);
  if (raw === undefined) return ending;
  // A failed end closes nothing: the WebSocket is destroyed now (the error is thrown below, once it is closed).
  ending.catch(() => raw.terminate());
  await closedWithin(raw, ms);
  await ending;
}

/** What parley uses of a `ws` WebSocket: its state, its `close` event and its `terminate`. */
interface RawWebSocket {
  /** `ws`'s `readyState`: 3 once closed. */
  readonly readyState: number;
  once(event: 'close', listener: () => void): unknown;
  terminate(): void;
}

/** `ws`'s `readyState` of a closed WebSocket (`WebSocket.CLOSED`). */
const CLOSED = 3;

/** The `ws` WebSocket Baileys' client keeps in its `socket` field (Socket/Client/websocket.js), if any. */
function webSocketOf(client: object): RawWebSocket | undefined {
  const raw: unknown = Reflect.get(client, 'socket');
  if (typeof raw !== 'object' || raw === null) return undefined;
  const candidate = raw as Partial<Record<keyof RawWebSocket, unknown>>;
  return typeof candidate.readyState === 'number' &&
    typeof candidate.once === 'function' &&
    typeof candidate.terminate === 'function'
    ? (raw as RawWebSocket)
    : undefined;
}

/** Resolves once `raw` is closed, destroying it after `ms` milliseconds if it is still open then. */
function closedWithin(raw: RawWebSocket, ms: number): Promise<void> {
  if (raw.readyState === CLOSED) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => raw.terminate(), ms);
    raw.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Ends `sock` at once, as a connection taken for dead (docs/decisions/0025-live-engine.md): the WebSocket under
 * Baileys' client is destroyed without a closing handshake (`ws` `terminate`), then Baileys' `end(error)` finds it
 * closing and emits its `close` with `error` now, which starts the reconnect. Baileys' `end` alone sends a close
 * frame and waits for the peer's, which a dead peer never sends: {@link CLOSE_HANDSHAKE_MS} since
 * {@link boundCloseHandshake}, 30 s (`ws`'s own limit) before. Nothing is read from the socket once dropped. Baileys 7 keeps that WebSocket in its
 * client's `socket` field (Socket/Client/websocket.js); a socket without one (a test's fake) is only ended.
 * @returns Baileys' `end`, which rejects when the socket ended already.
 */
export function dropSocket(sock: SocketLike, error: Error): Promise<void> {
  const raw: unknown = Reflect.get(sock.ws, 'socket');
  if (isTerminable(raw)) raw.terminate();
  return sock.end(error);
}

/** True for a `ws` WebSocket (what {@link dropSocket} destroys). */
function isTerminable(value: unknown): value is { terminate(): void } {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { terminate?: unknown }).terminate === 'function'
  );
}

/**
 * Unlinks the device on the platform (`sock.logout`), waiting at most `ms` milliseconds (docs/api.md#session: the
 * caller is answered even when the platform is silent).
 * @throws the platform's error, or `no answer within <s> s` after `ms`.
 */
export async function logoutWithin(sock: SocketLike, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  try {
    await Promise.race([sock.logout('parley logout'), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
