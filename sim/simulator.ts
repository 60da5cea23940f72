/**
 * The platform simulator: one HTTP server that accepts the platform's web protocol over WebSocket at
 * /ws/chat (Noise, binary nodes, pairing, login — see server/) and serves the control API under /control
 * (control/routes.ts). Started by `parley sim` (sim/cli.ts) or in-process by tests.
 */
import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { registerControlRoutes } from './control/routes.ts';
import { loadMediaIdentity, MediaFiles, saveMediaIdentity } from './media/persist.ts';
import { type MediaServer, startMediaServer } from './media/server.ts';
import { createMediaTls } from './media/tls.ts';
import { startChatstateRelay } from './messaging/chatstate.ts';
import { startHistorySync } from './messaging/history.ts';
import { startRelay } from './messaging/relay.ts';
import { Accounts } from './model/accounts.ts';
import { restoreUsers, StateError, StateFile, snapshot } from './model/state.ts';
import { createCertificateChain, type KeyPair } from './noise/certificates.ts';
import { Pairing } from './pairing/pairing.ts';
import { Connection, DEFAULT_FIRST_FRAME_DELAY_MS } from './server/connection.ts';
import { createContext, createSession, type SimContext } from './server/session.ts';

/** Options of {@link startSimulator}. */
export interface SimulatorOptions {
  /** TCP port on 127.0.0.1; 0 (default) picks a free one. */
  port?: number;
  /** Host to bind; default 127.0.0.1. */
  host?: string;
  /** Root key pair to sign the certificate chain with; default a fresh one. */
  root?: KeyPair;
  /** Logger; default a silent pino logger. */
  log?: Logger;
  /** TCP port of the HTTPS media server on the same host; 0 (default) picks a free one. */
  mediaPort?: number;
  /**
   * Directory of the state file (model/state.ts): the root key and every account, device and uploaded key are
   * read from it at start and written to it after changes, so a simulator restarted with the same directory (and
   * port) lets linked devices log in again without a scan. Created when missing. Default: memory only.
   */
  stateDir?: string;
  /**
   * Minimum time, in milliseconds (an integer ≥ 0), between a client's Noise finish arriving and the server's
   * first transport frame leaving: the round trip a real client is always at least away from the platform.
   * Baileys 6 needs it (server/connection.ts, docs/decisions/0040-simulator-serves-baileys-6.md); 0 answers at
   * once. Default {@link DEFAULT_FIRST_FRAME_DELAY_MS} (100). {@link startSimulator} rejects with RangeError when
   * negative, fractional or not finite.
   */
  firstFrameDelayMs?: number;
}

/** A running simulator. */
export interface Simulator {
  /** WebSocket URL for Baileys' `waWebSocketUrl`, e.g. `ws://127.0.0.1:PORT/ws/chat`. */
  url: string;
  /** Base URL of the control API, e.g. `http://127.0.0.1:PORT/control`. */
  control: string;
  /** The root public key (32 bytes) clients must trust as `WA_CERT_DETAILS.PUBLIC_KEY`. */
  rootKey: Buffer;
  port: number;
  /** The HTTPS media server (uploads and downloads of encrypted media). */
  media: MediaServer;
  /** PEM of the CA the media server's certificate comes from: what clients trust for media (`PLATFORM_CA_FILE`). */
  mediaCa: string;
  context: SimContext;
  app: FastifyInstance;
  /** Closes every socket and the server; with a state directory, writes the state a last time. */
  close(): Promise<void>;
}

/** The path Baileys connects to (the platform serves its web protocol there). */
export const CHAT_PATH = '/ws/chat';

/**
 * Starts a simulator and resolves once it listens. Rejects when the port cannot be bound; with `stateDir`, rejects
 * with StateError when the state file exists but cannot be read back, or names another root key than `root`, and
 * with MediaStateError (media/persist.ts) when the media identity or a stored media record cannot be read back.
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const log = options.log ?? pino({ level: 'silent' });
  const firstFrameDelayMs = options.firstFrameDelayMs ?? DEFAULT_FIRST_FRAME_DELAY_MS;
  if (!Number.isSafeInteger(firstFrameDelayMs) || firstFrameDelayMs < 0)
    throw new RangeError(`firstFrameDelayMs must be an integer ≥ 0, got ${firstFrameDelayMs}`);
  const accounts = new Accounts();
  const saved = options.stateDir === undefined ? undefined : StateFile.read(options.stateDir);
  if (saved && options.root && !saved.root.public.equals(options.root.public)) {
    throw new StateError(
      `simulator state in ${options.stateDir} was saved with another root key than the one given`,
    );
  }
  const chain = createCertificateChain(saved?.root ?? options.root);
  if (saved && options.stateDir !== undefined)
    restoreUsers(saved, accounts, StateFile.pathIn(options.stateDir));
  const host = options.host ?? '127.0.0.1';
  // With a state directory the media server keeps its CA, signing key, port and files across restarts, so the
  // media URLs messages carry stay valid and clients keep trusting it.
  const identity = (options.stateDir !== undefined ? loadMediaIdentity(options.stateDir) : undefined) ?? {
    tls: await createMediaTls(),
    signing: randomBytes(32),
  };
  const mediaFiles = options.stateDir !== undefined ? new MediaFiles(options.stateDir) : undefined;
  const mediaPort = options.mediaPort ?? identity.port;
  const media = await startMediaServer({
    tls: identity.tls,
    signing: identity.signing,
    log: log.child({ component: 'media' }),
    host,
    ...(mediaPort !== undefined ? { port: mediaPort } : {}),
    ...(mediaFiles ? { initial: mediaFiles.load(), onStore: (stored) => mediaFiles.save(stored) } : {}),
  });
  if (options.stateDir !== undefined) saveMediaIdentity(options.stateDir, { ...identity, port: media.port });
  const context = createContext({ accounts, pairing: new Pairing(accounts), chain, log, media });
  const state =
    options.stateDir === undefined
      ? undefined
      : new StateFile(options.stateDir, () => snapshot(chain.root, accounts), log);
  if (state) {
    const changed = () => state.changed();
    for (const event of ['stanza', 'iq', 'login', 'unlink']) context.events.on(event, changed);
    if (saved) log.info({ path: state.path, users: saved.users.length }, 'simulator state restored');
    else state.changed();
  }
  const app: FastifyInstance = Fastify({ loggerInstance: log as FastifyBaseLogger });
  if (state) {
    app.addHook('onResponse', async (request) => {
      if (request.method !== 'GET') state.changed();
    });
  }
  const wss = new WebSocketServer({ noServer: true });
  const connections = new Set<Connection>();
  wss.on('connection', (ws) => {
    const connection = new Connection(
      ws,
      chain,
      (c, payload, key) => {
        context.connections.identified(c.id, payload);
        return createSession(context, c, payload, key);
      },
      log,
      { firstFrameDelayMs },
    );
    context.connections.opened(connection.id, Date.now());
    connections.add(connection);
    log.debug({ connection: connection.id }, 'websocket opened');
    ws.on('close', () => connections.delete(connection));
  });
  let closing = false;
  app.server.on('upgrade', (request, socket, head) => {
    if (closing) {
      // Shutting down: a client that reconnects at once must not keep the server open.
      socket.destroy();
      return;
    }
    const path = new URL(request.url ?? '/', 'http://sim').pathname;
    if (path !== CHAT_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });
  startRelay(context, context.signalQueue);
  startChatstateRelay(context);
  startHistorySync(context);
  registerControlRoutes(app, context);
  try {
    await app.listen({ port: options.port ?? 0, host });
  } catch (error) {
    await media.close();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : (options.port ?? 0);
  return {
    url: `ws://${host}:${port}${CHAT_PATH}`,
    control: `http://${host}:${port}/control`,
    rootKey: chain.root.public,
    port,
    media,
    mediaCa: media.ca,
    context,
    app,
    async close() {
      closing = true;
      for (const connection of connections) connection.drop();
      wss.close();
      await app.close();
      await media.close();
      await state?.close();
    },
  };
}
