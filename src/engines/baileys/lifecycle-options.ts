import type { AuthenticationState, CacheStore, UserFacingSocketConfig, WAVersion } from 'baileys';
import type { EngineSessionContext, SessionLock } from '../engine.ts';
import type { BaileysLogger, SocketFactory, SocketLike } from './socket.ts';

/** Settings and defaults of a live session's socket lifecycle (lifecycle.ts). */

/** Default bound on `connect()`: the platform must answer (QR or open) within this, ms. */
export const CONNECT_DEADLINE_MS = 8_000;

/**
 * Default number of platform refusals in a row (a `<failure>` or `<stream:error>` closing the socket before it
 * opened again) after which a reconnecting session stops: a blocked or banned account is refused at every
 * login, and would otherwise retry forever (with backoff 1, 2, 4, 8 s the fifth refusal comes ~15 s after the
 * first). Network failures do not count: an outage is retried until the platform is back.
 */
export const LOGIN_REFUSAL_LIMIT = 5;

/**
 * Longest a graceful close waits for the incoming stanzas being handled, ms: a handler waiting on the platform
 * must not hold a node's stop up (its stanza is then cut as before, and the platform hands it to the next owner).
 */
export const QUIESCE_MS = 3_000;

/** Everything the lifecycle needs from the engine and the session. */
export interface LifecycleOptions {
  context: EngineSessionContext;
  lock: SessionLock;
  socketFactory: SocketFactory;
  baileysLogger: BaileysLogger;
  /** Socket settings the session adds (getMessage, cachedGroupMetadata, caches, history, browser). */
  socketConfig: () => Omit<UserFacingSocketConfig, 'auth' | 'logger' | 'version'>;
  version: WAVersion | undefined;
  fetchVersion: () => Promise<WAVersion>;
  /** Key cache handed to `makeCacheableSignalKeyStore` (kept across reconnects, flushed at the end). */
  keyCache: CacheStore;
  connectDeadlineMs: number;
  random: () => number;
  /** Refusals in a row before a reconnecting session stops ({@link LOGIN_REFUSAL_LIMIT}). */
  loginRefusalLimit: number;
  /** Attaches the session's listeners to a new socket; returns their detach. */
  attach: (sock: SocketLike) => () => void;
}

/**
 * A new socket from `options.socketFactory` on the credentials `auth`, with the session's settings (`socketConfig`),
 * Baileys' logger and the platform version `version` (undefined: Baileys' own). @throws the factory's error.
 */
export function createSocket(
  options: LifecycleOptions,
  auth: AuthenticationState,
  version: WAVersion | undefined,
): SocketLike {
  return options.socketFactory({
    ...options.socketConfig(),
    auth,
    logger: options.baileysLogger,
    ...(version ? { version } : {}),
  });
}
