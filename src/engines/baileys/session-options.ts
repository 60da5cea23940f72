import type { Agent } from 'node:https';
import type { GroupMetadata, UserFacingSocketConfig, WABrowserDescription, WAVersion } from 'baileys';
import { GROUP_DOMAIN } from '../../domain/messages.ts';
import type { SessionLocks } from '../engine.ts';
import { BoundedCache } from './cache.ts';
import type { LinkPreviewFetcher } from './outgoing.ts';
import type { SocketFactory } from './socket.ts';

// How a live session (session.ts) is configured: its options, its Baileys log level, its bounded caches and the
// Baileys socket settings (docs/decisions/0025-live-engine.md, Socket settings).

const HOUR = 3_600_000;

/** Everything a session takes from the engine (see `BaileysEngineOptions` for meanings and defaults). */
export interface BaileysSessionOptions {
  locks: SessionLocks;
  socketFactory: SocketFactory;
  browser: WABrowserDescription;
  version: WAVersion | undefined;
  fetchVersion: () => Promise<WAVersion>;
  connectDeadlineMs: number;
  ackTimeoutMs: number;
  fullHistory: boolean;
  baileysLogLevel: string;
  linkPreview?: LinkPreviewFetcher;
  random: () => number;
  /** Keep-alive ping interval, ms (Baileys' `keepAliveIntervalMs`; a silent platform is declared lost after it + 5 s). */
  keepAliveIntervalMs: number;
  /** Platform refusals of a reconnecting login in a row after which the session stops (lifecycle.ts). */
  loginRefusalLimit: number;
  /** WebSocket URL of a platform simulator (Baileys' `waWebSocketUrl`); undefined: the real platform. */
  platformUrl?: string;
  /** HTTPS agent for media uploads (Baileys' `fetchAgent`): trusts a simulator's media CA; undefined: Node's default. */
  mediaAgent?: Agent;
  /** Wait for a phone's answer to a media re-upload request, ms; default `MEDIA_REUPLOAD_TIMEOUT_MS` (media-reupload.ts). */
  mediaReuploadTimeoutMs?: number;
}

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/**
 * The less verbose of two pino levels: Baileys logs at `wanted` but never more than parley's own logger, so a
 * silent or error-only deployment stays that way (docs/decisions/0023-operations.md: Baileys logs stanzas at
 * info/debug).
 */
export function quieterLevel(parent: string, wanted: string): string {
  const p = LEVELS.indexOf(parent);
  const w = LEVELS.indexOf(wanted);
  if (p < 0) return w < 0 ? 'warn' : wanted;
  return w > p ? wanted : parent;
}

/** Most ids of undecryptable messages one session remembers (a few KB). */
export const UNDECRYPTED_IDS = 256;

/**
 * The bounded caches of one session (docs/decisions/0025-live-engine.md: every cache is bounded): group metadata,
 * recently sent messages (for the platform's retries) and presence subscriptions of the session, the signal key
 * cache of the lifecycle, Baileys' retry, device, call offer and placeholder resend caches, and the ids of messages
 * first delivered undecryptable. Lifetimes in ms.
 */
export class SessionCaches {
  readonly groups: BoundedCache;
  readonly recent: BoundedCache;
  readonly presence: BoundedCache;
  readonly keyCache: BoundedCache;
  readonly retries: BoundedCache;
  readonly devices: BoundedCache;
  readonly calls: BoundedCache;
  readonly placeholders: BoundedCache;
  /**
   * Ids of messages whose first delivery could not be decrypted, for an hour (Baileys' placeholder resends wait at
   * most that long), at most {@link UNDECRYPTED_IDS}: their resends may come on a later socket of the session
   * (listeners.ts).
   */
  readonly undecrypted: BoundedCache;
  /** Every cache above, for flushing at logout and closing at shutdown. */
  readonly all: readonly BoundedCache[];

  /** Makes the caches on the session's clock (`now`, epoch ms). */
  constructor(now: () => number) {
    this.groups = new BoundedCache(HOUR, 1_000, now);
    this.recent = new BoundedCache(HOUR, 256, now);
    this.presence = new BoundedCache(HOUR, 2_000, now);
    this.keyCache = new BoundedCache(5 * 60_000, 20_000, now, keepsSignalKey);
    this.retries = new BoundedCache(HOUR, 5_000, now);
    this.devices = new BoundedCache(5 * 60_000, 5_000, now);
    this.calls = new BoundedCache(5 * 60_000, 100, now);
    this.placeholders = new BoundedCache(HOUR, 1_000, now);
    this.undecrypted = new BoundedCache(HOUR, UNDECRYPTED_IDS, now);
    this.all = [
      this.groups,
      this.recent,
      this.presence,
      this.keyCache,
      this.retries,
      this.devices,
      this.calls,
      this.placeholders,
      this.undecrypted,
    ];
  }
}

/**
 * Whether the signal-key cache keeps the entry `key` (Baileys' `makeCacheableSignalKeyStore` names entries
 * `<type>.<id>`): every type but pre-keys. Baileys writes a batch of one-time pre-keys at linking and whenever the
 * platform runs low (812 at linking), and reads one only when a new contact opens a Signal session with it, after
 * which it is deleted; kept, they held about 170 KB per session for the cache's five minutes and, as nothing reads
 * them, until later writes swept them (docs/decisions/0025-live-engine.md: bounded memory).
 */
export function keepsSignalKey(key: string): boolean {
  return !key.startsWith('pre-key.');
}

/**
 * The Baileys socket settings of a session (docs/decisions/0025-live-engine.md, Socket settings): no online mark on
 * connect, own events not emitted, a 20 s query timeout, the keep-alive interval, history sync as configured, and
 * the session's caches; `getMessage` answers the platform's retry requests (session-parts.ts). A send to a group whose
 * metadata the cache does not hold gets it from `fetchGroup` (session-parts.ts: fetched through the session's socket,
 * kept in the cache and teaching the resolver the members' LID pairs, groups.ts `keepGroup`,
 * docs/decisions/0038-lid-mappings.md) instead of Baileys fetching it unseen; `fetchGroup` answering undefined (no
 * socket) lets Baileys fetch it, and its error fails the send as Baileys' own fetch would. Status sends
 * (`status@broadcast`) are never fetched.
 */
export function socketConfig(
  options: BaileysSessionOptions,
  caches: SessionCaches,
  getMessage: UserFacingSocketConfig['getMessage'],
  fetchGroup: (jid: string) => Promise<GroupMetadata | undefined> = async () => undefined,
): Omit<UserFacingSocketConfig, 'auth' | 'logger' | 'version'> {
  return {
    browser: options.browser,
    markOnlineOnConnect: false,
    syncFullHistory: options.fullHistory,
    ...(options.fullHistory ? { shouldSyncHistoryMessage: () => true } : {}),
    emitOwnEvents: false,
    generateHighQualityLinkPreview: false,
    defaultQueryTimeoutMs: 20_000,
    keepAliveIntervalMs: options.keepAliveIntervalMs,
    getMessage,
    cachedGroupMetadata: async (jid) =>
      caches.groups.get<GroupMetadata>(jid) ??
      (jid.endsWith(`@${GROUP_DOMAIN}`) ? await fetchGroup(jid) : undefined),
    msgRetryCounterCache: caches.retries,
    userDevicesCache: caches.devices,
    callOfferCache: caches.calls,
    placeholderResendCache: caches.placeholders,
    ...(options.platformUrl ? { waWebSocketUrl: options.platformUrl } : {}),
    ...(options.mediaAgent ? { fetchAgent: options.mediaAgent } : {}),
  };
}
