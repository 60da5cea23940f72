import type { Agent } from 'node:https';
import { fetchLatestWaWebVersion, type WABrowserDescription, type WAVersion } from 'baileys';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../domain/clock.ts';
import type { Engine, EngineSession, EngineSessionContext, SessionLocks } from '../engine.ts';
import { CONNECT_DEADLINE_MS, LOGIN_REFUSAL_LIMIT } from './lifecycle-options.ts';
import { trustSimulatorMediaHost } from './media-download.ts';
import type { LinkPreviewFetcher } from './outgoing.ts';
import { mediaUploadAgent, type PlatformEndpoint, trustPlatformRoot } from './platform.ts';
import { BaileysSession } from './session.ts';
import { makeBaileysSocket, type SocketFactory } from './socket.ts';

export type { LinkPreview, LinkPreviewFetcher } from './outgoing.ts';
export type { PlatformEndpoint } from './platform.ts';
export type { SocketFactory, SocketLike } from './socket.ts';

/** How the linked device shows in the phone's "Linked devices" list: `Chrome (parley)`. */
export const DEFAULT_BROWSER: WABrowserDescription = ['parley', 'Chrome', '1.0'];

/** Default keep-alive ping interval, ms: Baileys' own default (lib/Defaults `keepAliveIntervalMs`), set explicitly. */
export const KEEP_ALIVE_INTERVAL_MS = 30_000;

/** Options of {@link BaileysEngine}. Only `locks` and `logger` are required. */
export interface BaileysEngineOptions {
  /**
   * The one-socket lock of each instance (the platform allows one connection per credential); parley passes
   * the store-backed one of src/sessions/instance-lock.ts.
   */
  locks: SessionLocks;
  /** Engine-level logger (sessions log through their context's logger). */
  logger: FastifyBaseLogger;
  /** Creates sockets; default Baileys' `makeWASocket`. Tests inject a fake. */
  socketFactory?: SocketFactory;
  /** Fallback clock for sessions whose context has none; default `Date.now`. */
  clock?: Clock;
  /** Device description shown on the phone; default {@link DEFAULT_BROWSER}. */
  browser?: WABrowserDescription;
  /** Platform client version; default Baileys' built-in one (refreshed on a 405 close). */
  version?: WAVersion;
  /** Fetches the platform's current version on a 405; default Baileys' `fetchLatestWaWebVersion` (5 s bound). */
  fetchVersion?: () => Promise<WAVersion>;
  /** Bound on `connect()`, ms (default 8,000): the platform must answer with a QR or an open by then. */
  connectDeadlineMs?: number;
  /**
   * How long a relay waits for the server's ack, ms (default 5,000); without one by then the connection is dropped
   * as lost and the relay's outcome is unknown (ack-wait.ts, docs/decisions/0025-live-engine.md).
   */
  ackTimeoutMs?: number;
  /** Ask the phone for the full history (Baileys `syncFullHistory`); default false (recent history only). */
  fullHistory?: boolean;
  /** Level of Baileys' own log lines (default `warn`: Baileys logs stanzas at info/debug). */
  baileysLogLevel?: string;
  /** Fetches link previews under parley's SSRF guard when a text asks for one; without it the card shows the host. */
  linkPreview?: LinkPreviewFetcher;
  /** Random source for backoff jitter, [0, 1); default `Math.random`. */
  random?: () => number;
  /**
   * How often the socket pings the platform, ms (Baileys' `keepAliveIntervalMs`); default
   * {@link KEEP_ALIVE_INTERVAL_MS}. Baileys checks at every interval and declares the connection lost (408, then
   * parley reconnects) once nothing arrived for the interval plus 5 s: a silent platform is noticed within two
   * intervals plus 5 s, and reported lost at most `CLOSE_HANDSHAKE_MS` (socket.ts) later, when its close is cut.
   */
  keepAliveIntervalMs?: number;
  /**
   * How many times in a row the platform may refuse a reconnecting login (a `<failure>` or a stream error before
   * the connection opened) before the session stops instead of retrying; default {@link LOGIN_REFUSAL_LIMIT}.
   */
  loginRefusalLimit?: number;
  /**
   * A platform simulator instead of the real platform (docs/decisions/0007-simulator.md): its WebSocket URL for every
   * socket, and its Noise certificate root, trusted process-wide when the engine is built (`trustPlatformRoot`), and
   * the CA of its media server, trusted by the sessions' media upload agent only (`mediaUploadAgent`). Default: none.
   */
  platform?: PlatformEndpoint;
}

async function fetchVersionWithin(ms: number): Promise<WAVersion> {
  const result = await fetchLatestWaWebVersion({ signal: AbortSignal.timeout(ms) });
  if (!result.isLatest)
    throw new Error(`could not fetch the platform version: ${JSON.stringify(result.error ?? {})}`);
  return result.version;
}

/**
 * The live engine (docs/decisions/0024-engines-and-data-flow.md, docs/decisions/0025-live-engine.md): drives real
 * WhatsApp accounts through Baileys 7 behind the same `Engine` interface as the sandbox. Credentials live in the
 * instance's sealed auth store; one socket per instance across processes (store lock); close codes per
 * `close-policy.ts`; events mapped to domain events with phone JIDs.
 */
export class BaileysEngine implements Engine {
  readonly name = 'baileys' as const;
  readonly #options: BaileysEngineOptions;
  /**
   * The sessions this engine made, held weakly: the session manager holds the ones it keeps, and a session nobody
   * holds any more (a media download's, one released or logged out) is collected instead of living as long as the
   * engine. A connected session stays reachable from its socket.
   */
  readonly #sessions = new Set<WeakRef<BaileysSession>>();
  /** Drops the reference of a collected session from {@link #sessions}. */
  readonly #forget = new FinalizationRegistry<WeakRef<BaileysSession>>((ref) => {
    this.#sessions.delete(ref);
  });
  readonly #mediaAgent: Agent | undefined;

  /**
   * Trusts the simulator's Noise root and media host when `options.platform` names one.
   * @throws RangeError when `options.platform.rootKey` is not 32 bytes.
   */
  constructor(options: BaileysEngineOptions) {
    this.#options = options;
    if (options.platform?.rootKey) trustPlatformRoot(options.platform.rootKey);
    if (options.platform?.url) trustSimulatorMediaHost(options.platform.url);
    this.#mediaAgent = options.platform?.ca ? mediaUploadAgent(options.platform.ca) : undefined;
  }

  createSession(context: EngineSessionContext): EngineSession {
    const o = this.#options;
    const session = new BaileysSession(
      { ...context, clock: context.clock ?? o.clock ?? Date.now },
      {
        locks: o.locks,
        socketFactory: o.socketFactory ?? makeBaileysSocket,
        browser: o.browser ?? DEFAULT_BROWSER,
        version: o.version,
        fetchVersion: o.fetchVersion ?? (() => fetchVersionWithin(5_000)),
        connectDeadlineMs: o.connectDeadlineMs ?? CONNECT_DEADLINE_MS,
        ackTimeoutMs: o.ackTimeoutMs ?? 5_000,
        fullHistory: o.fullHistory ?? false,
        baileysLogLevel: o.baileysLogLevel ?? 'warn',
        random: o.random ?? Math.random,
        keepAliveIntervalMs: o.keepAliveIntervalMs ?? KEEP_ALIVE_INTERVAL_MS,
        loginRefusalLimit: o.loginRefusalLimit ?? LOGIN_REFUSAL_LIMIT,
        ...(o.linkPreview ? { linkPreview: o.linkPreview } : {}),
        ...(o.platform?.url ? { platformUrl: o.platform.url } : {}),
        ...(this.#mediaAgent ? { mediaAgent: this.#mediaAgent } : {}),
      },
    );
    const ref = new WeakRef(session);
    this.#sessions.add(ref);
    this.#forget.register(session, ref);
    return session;
  }

  /**
   * Closes every session this engine made that still exists (releases their locks); stored credentials are
   * untouched.
   */
  async close(): Promise<void> {
    const sessions = [...this.#sessions].map((ref) => ref.deref()).filter((s) => s !== undefined);
    this.#sessions.clear();
    await Promise.allSettled(sessions.map((s) => s.close()));
  }
}
