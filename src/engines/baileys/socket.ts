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
 * The production {@link SocketFactory}: Baileys' real `makeWASocket` (it connects immediately), its per-socket
 * key-transaction storage made a keyed view of one process-wide storage ({@link withKeyedStorages}), so a
 * process that opens many sockets does not slow every promise by the number of sockets it ever opened.
 */
export const makeBaileysSocket: SocketFactory = (config) => withKeyedStorages(() => makeWASocket(config));

/**
 * Ends `sock` at once, as a connection taken for dead (docs/decisions/0025-live-engine.md): the WebSocket under
 * Baileys' client is destroyed without a closing handshake (`ws` `terminate`), then Baileys' `end(error)` finds it
 * closing and emits its `close` with `error` now, which starts the reconnect. Baileys' `end` alone sends a close
 * frame and waits for the peer's, which a dead peer never sends: `ws` destroys the socket only after 30 s, and the
 * reconnect waited that long. Nothing is read from the socket once dropped. Baileys 7 keeps that WebSocket in its
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
