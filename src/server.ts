import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { type Bootstrap, bootstrapIfEmpty } from './app/bootstrap.ts';
import { type Config, ConfigError } from './config/config.ts';
import { buildApp } from './http/app.ts';
import { REDACTING_LOGGER_OPTIONS } from './http/log-redaction.ts';
import { createServices } from './services.ts';

/** A running server and how to stop it. */
export interface RunningServer {
  /** The address it listens on, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /**
   * Graceful stop (docs/decisions/0023-operations.md): stop accepting, finish in-flight requests, close engines and
   * the store.
   */
  stop(): Promise<void>;
}

/**
 * The block printed once, after the server listens, when the first boot created a test key and the dashboard
 * owner (docs/deploy.md "First boot"): framed by rules so it stands out among the log lines, each secret shown
 * exactly once (the curl line reads the key from `$PARLEY_KEY`), and written nowhere else.
 */
export function bootstrapBanner(bootstrap: Bootstrap, publicUrl: string): string {
  const rule = '='.repeat(78);
  return [
    '',
    rule,
    '  parley: first boot — shown only this once, store these now',
    rule,
    '  Created organization "default", a sandbox instance and a test API key:',
    '',
    `    ${bootstrap.key.key}`,
    '',
    '  Try it (with the key above in PARLEY_KEY):',
    '',
    `    curl -s -X POST ${publicUrl}/v1/session/connect -H "Authorization: Bearer $PARLEY_KEY"`,
    '',
    `  Docs: ${publicUrl}/docs`,
    `  Dashboard: ${publicUrl}/dashboard — sign in as ${bootstrap.owner.user.email} with the password`,
    '',
    `    ${bootstrap.owner.password}`,
    '',
    '  Add users with npx parley user create; reset a password with npx parley user reset-password.',
    rule,
    '',
  ].join('\n');
}

/**
 * One line naming the setting that fixes a failure to listen (docs/deploy.md "Start-up errors"), or undefined
 * when the error is not one of those.
 */
export function listenFailure(error: unknown, config: Config): string | undefined {
  switch ((error as { code?: unknown } | null)?.code) {
    case 'EADDRINUSE':
      return `port ${config.port} is in use: set PORT to a free port or stop the other process`;
    case 'EACCES':
      return `port ${config.port} needs privileges this process lacks: set PORT to 1024 or above`;
    case 'EADDRNOTAVAIL':
      return `HOST ${config.host} is not an address of this machine: set HOST to one of its addresses or 0.0.0.0`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `HOST ${config.host} does not resolve to an address: set HOST to an address of this machine or 0.0.0.0`;
    default:
      return undefined;
  }
}

/**
 * The boot warning while `PLATFORM_URL` or `PLATFORM_ROOT_KEY` is set (docs/decisions/0007-simulator.md): live
 * instances then talk to a platform simulator, not WhatsApp; it names every PLATFORM_* variable set
 * (`PLATFORM_CA_FILE` too). Undefined when neither is set.
 */
export function platformWarning(config: Config): string | undefined {
  const { url, rootKey, caFile } = config.platform;
  if (url === undefined && rootKey === undefined) return undefined;
  const set = [
    url === undefined ? undefined : 'PLATFORM_URL',
    rootKey === undefined ? undefined : 'PLATFORM_ROOT_KEY',
    caFile === undefined ? undefined : 'PLATFORM_CA_FILE',
  ].filter((name) => name !== undefined);
  const names = set.length > 1 ? `${set.slice(0, -1).join(', ')} and ${set.at(-1)}` : set.join('');
  return `${names} set: live instances connect to the platform simulator at ${url}, not to WhatsApp`;
}

/**
 * The base URL the first-boot banner prints: `PUBLIC_URL`, or `http://localhost:<port>` with the port the server
 * got when `PORT` is 0 (any free port) and `PUBLIC_URL` is unset, so its curl line reaches this server.
 */
function bannerUrl(config: Config, port: number): string {
  return config.port === 0 && config.publicUrl === 'http://localhost:0'
    ? `http://localhost:${port}`
    : config.publicUrl;
}

/**
 * Boots the service: store (migrated), sessions restored, HTTP listening, then the first-boot bootstrap and its
 * banner.
 * @param print where the first-boot banner goes (stdout by default).
 * @throws ConfigError with one line naming the setting when a file a setting names is unreadable, the store
 *   cannot be opened, a live process uses this node's `NODE_ID` or the port cannot be bound (everything started so
 *   far is closed first).
 */
export async function startServer(
  config: Config,
  options: { logger?: Logger; print?: (text: string) => void } = {},
): Promise<RunningServer> {
  let { logger, print } = options;
  if (!logger) {
    // The log's own stdout stream (pino writes in the background): the first-boot block goes through it too, so it
    // comes out after the lines logged before it (a flush does not wait for a write in progress).
    const stdout = pino.destination({ dest: 1, sync: false });
    logger = pino({ level: config.logLevel, ...REDACTING_LOGGER_OPTIONS }, stdout);
    print ??= (text) => stdout.write(`${text}\n`);
  }
  print ??= (text) => process.stdout.write(`${text}\n`);
  const warning = platformWarning(config);
  if (warning) logger.warn({ platformUrl: config.platform.url }, warning);
  const services = await createServices(config, { logger });
  // A start that fails after this point closes what it started, so the process ends instead of idling with a
  // listening server or an open store and Redis connection.
  const abandon = async (app?: FastifyInstance) => {
    await app?.close().catch((error: unknown) => logger.warn({ err: error }, 'closing the server failed'));
    await services
      .close()
      .catch((error: unknown) => logger.warn({ err: error }, 'closing the services failed'));
  };
  let app: FastifyInstance;
  try {
    app = await buildApp(services);
  } catch (error) {
    await abandon();
    throw error;
  }
  let url: string;
  try {
    // Alone, this node restores every session; in a cluster each node restores the instances it leases.
    const restored = services.cluster ? 0 : await services.sessions.restoreAll();
    if (restored > 0) logger.info({ restored }, 'sessions restored');
    url = await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await abandon(app);
    const line = listenFailure(error, config);
    throw line === undefined ? error : new ConfigError(line);
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  let bootstrap: Bootstrap | null;
  try {
    if (services.cluster) await services.cluster.keeper.start(nodeUrl(config, port));
    // Created only once the server listens, so a start that fails never creates a key nobody saw; printed after
    // the listening line, so it is the last thing a person starting parley reads.
    bootstrap = await bootstrapIfEmpty(services.store.db);
  } catch (error) {
    await abandon(app);
    throw error;
  }
  logger.info(
    { url, store: config.database.dialect, redis: Boolean(config.redisUrl), firstBoot: bootstrap !== null },
    'parley listening',
  );
  if (bootstrap) print(bootstrapBanner(bootstrap, bannerUrl(config, port)));
  let stopping: Promise<void> | undefined;
  return {
    url,
    stop: () => {
      stopping ??= (async () => {
        // docs/decisions/0023-operations.md: stop accepting and drain requests while the webhook worker finishes its
        // attempts in flight (it claims nothing new); requests still running after their share of the budget are cut
        // so engines, the event recorder and the store always get closed before the process exits.
        const budget = config.shutdownTimeoutMs;
        // docs/decisions/0008-leases-and-fencing.md: a cluster node hands its instances to the other nodes before it
        // stops serving; one whose id another process took over hands nothing: the leases under it are that one's.
        if (services.nodes.displaced === undefined)
          await services.cluster?.keeper
            .drain(budget * 0.3)
            .catch((error: unknown) => logger.warn({ err: error }, 'handing instances over failed'));
        // Keep serving (forwarding to the new owners) until the load balancer has seen /readyz turn false, so no
        // request reaches a closed listener or an idle connection being closed.
        if (config.cluster) await new Promise((resolve) => setTimeout(resolve, config.cluster?.drainGraceMs));
        const webhooksStopped = services.webhooks.stop(budget * 0.5);
        let timer: NodeJS.Timeout | undefined;
        const httpDeadline = new Promise<void>((resolve) => {
          timer = setTimeout(() => {
            logger.warn('requests still running at the shutdown deadline; closing their connections');
            app.server.closeAllConnections();
            resolve();
          }, budget * 0.4);
        });
        await Promise.race([app.close(), httpDeadline]);
        clearTimeout(timer);
        await webhooksStopped;
        await services.close();
      })();
      return stopping;
    },
  };
}

/**
 * The base URL other nodes reach this node at (docs/decisions/0008-leases-and-fencing.md): `NODE_URL`, else
 * `http://HOST:PORT` with the port actually bound, using the host name when HOST is a wildcard address.
 */
export function nodeUrl(config: Config, port: number): string {
  if (config.cluster?.nodeUrl) return config.cluster.nodeUrl;
  const host = config.host === '0.0.0.0' || config.host === '::' ? hostname() : config.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** How often a server started by npm checks that the npm process is still its launcher (milliseconds). */
export const LAUNCHER_CHECK_MS = 500;

/** How {@link serve} was started. */
export interface ServeOptions {
  /**
   * Started by a package manager's script (`npm start`): the pid of the process that launched this one, read as the
   * process began; the server stops as on SIGTERM once its parent is no longer that process. npm hands a SIGTERM to
   * the shell running the script, and a shell that does not hand it on (Debian's dash) ends alone, leaving the
   * server running without a parent nobody stops (docs/decisions/0023-operations.md). Absent: no such watch.
   */
  launcherPid?: number;
}

/**
 * Runs the server until SIGTERM or SIGINT (or, with `launcherPid`, until its launching process is gone), then
 * stops gracefully within `config.shutdownTimeoutMs`, plus a cluster node's drain grace
 * (docs/decisions/0023-operations.md: exit 0 within 10 s; exit 1 when the budget is exceeded).
 */
export async function serve(config: Config, options: ServeOptions = {}): Promise<void> {
  // One stdout stream for the log and the first-boot block, so the block comes out after the lines before it.
  const stdout = pino.destination({ dest: 1, sync: false });
  const logger = pino({ level: config.logLevel, ...REDACTING_LOGGER_OPTIONS }, stdout);
  // Last resort, from the first instant (sessions connect while the start restores them): a stray rejection is a bug
  // to log, not a reason to drop every instance with the process.
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection'));
  const shutdown = (running: RunningServer, signal: string) => {
    logger.info({ signal }, 'shutting down');
    // The drain grace is a wait on purpose (the node keeps serving), not part of the work the budget bounds.
    const timer = setTimeout(
      () => {
        logger.error('shutdown took too long; exiting');
        process.exit(1);
      },
      config.shutdownTimeoutMs + (config.cluster?.drainGraceMs ?? 0),
    );
    timer.unref();
    running.stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // Listened for before the start: a signal that comes while the server starts, or just as it prints its listening
  // line, stops it gracefully once it is up instead of ending the process with the signal's default action.
  let server: RunningServer | undefined;
  let signalled: string | undefined;
  let stopping = false;
  const onSignal = (signal: string) => {
    if (server) {
      // One stop, whichever reason comes first (a SIGINT after a SIGTERM, the launcher gone after either). A repeat
      // never cuts the drain short: npm hands a Ctrl-C's SIGINT on to a process that got it already, and
      // orchestrators repeat SIGTERM; the budget bounds the stop (docs/decisions/0023-operations.md).
      if (stopping) {
        logger.info({ signal }, 'already stopping');
        return;
      }
      stopping = true;
      shutdown(server, signal);
    } else signalled ??= signal;
  };
  // `on`, not `once`: a listener stays for every repeat, which would otherwise meet Node's default action (the
  // process killed at once, the requests in flight unanswered, nothing closed).
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  const launcher = options.launcherPid;
  if (launcher !== undefined) {
    // An orphan is handed to init (or a subreaper): the parent's pid changes once the launcher is gone. The pid was
    // read as the process began, so a launcher gone before this point (during bin/parley.js's build) is seen too.
    const watch = setInterval(() => {
      if (process.ppid === launcher) return;
      clearInterval(watch);
      logger.warn({ launcher }, 'the process that started parley is gone; stopping');
      onSignal('launcher gone');
    }, LAUNCHER_CHECK_MS);
    watch.unref();
  }
  server = await startServer(config, { logger, print: (text) => stdout.write(`${text}\n`) });
  if (signalled) onSignal(signalled);
}
