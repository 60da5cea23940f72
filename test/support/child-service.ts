/**
 * parley's service (services + webhook worker + HTTP app) as a child process, for crash tests that SIGKILL it.
 * It is built as `startServer` builds it (createServices, buildApp, sessions restored, listening), plus what a
 * test needs and the production config cannot say:
 *
 * - env `CHILD_WORKER_ID`, `CHILD_POLL_MS`, `CHILD_STALE_MS`: webhook worker id, poll interval, stale timeout;
 * - env `CHILD_HEARTBEAT_MS`: the node registry's heartbeat (and sweep) interval;
 * - env `CHILD_STREAM_POLL_MS`, `CHILD_REVOCATION_POLL_MS`: how often idle event streams read the log and the key
 *   cache looks for revocations (a test of the store's signals makes both far longer than it waits);
 * - env `CHILD_PG_SCHEMA`: the PostgreSQL schema of the test store (openStore's `schema` option);
 * - env `CHILD_LEASE_HEARTBEAT_MS`, `CHILD_LEASE_TTL_MS`: lease timing of a cluster node (with CLUSTER_SECRET set,
 *   the node starts its leases once listening, at `http://127.0.0.1:<port>`, and drains them first on SIGTERM, then
 *   keeps serving DRAIN_GRACE_SECONDS as startServer does).
 *
 * Every other setting comes from the ordinary environment (DATABASE_URL, DATA_DIR, SECRET_KEY, WEBHOOK_*,
 * OUTBOUND_CA_FILE). stdout carries one JSON line, `{"ready":true,"port":…,"workerId":…}`, once listening.
 * SIGTERM stops gracefully (app, then services: the worker finishes or releases its claims) and exits 0.
 */
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { createServices } from '../../src/services.ts';
import { openStore } from '../../src/store/database.ts';

const env = process.env;
const number = (name: string): number | undefined => (env[name] ? Number(env[name]) : undefined);
const say = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const config = loadConfig(env);
const logger = pino({ level: env.CHILD_LOG_LEVEL ?? 'silent' }, pino.destination(2));
const schema = env.CHILD_PG_SCHEMA;
const store = await openStore(config.database, {
  ...(schema ? { schema } : {}),
  onConnectionError: (error) => logger.warn({ err: error }, 'a store connection failed'),
});
const pollIntervalMs = number('CHILD_POLL_MS');
const staleAfterMs = number('CHILD_STALE_MS');
const heartbeatMs = number('CHILD_HEARTBEAT_MS');
const streamPollMs = number('CHILD_STREAM_POLL_MS');
const revocationPollMs = number('CHILD_REVOCATION_POLL_MS');
const services = await createServices(config, {
  logger,
  store,
  ...(streamPollMs === undefined ? {} : { streamPollMs }),
  ...(revocationPollMs === undefined ? {} : { revocationPollMs }),
  webhookWorker: {
    ...(env.CHILD_WORKER_ID ? { workerId: env.CHILD_WORKER_ID } : {}),
    ...(pollIntervalMs === undefined ? {} : { pollIntervalMs }),
    ...(staleAfterMs === undefined ? {} : { staleAfterMs }),
  },
  ...(heartbeatMs === undefined ? {} : { nodeRegistry: { heartbeatMs } }),
  cluster: {
    ...(number('CHILD_LEASE_HEARTBEAT_MS') === undefined
      ? {}
      : { heartbeatMs: number('CHILD_LEASE_HEARTBEAT_MS') }),
    ...(number('CHILD_LEASE_TTL_MS') === undefined ? {} : { ttlMs: number('CHILD_LEASE_TTL_MS') }),
  },
});
const app = await buildApp(services);
if (!services.cluster) await services.sessions.restoreAll();
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : 0;
await services.cluster?.keeper.start(`http://127.0.0.1:${port}`);

process.once('SIGTERM', () => {
  void (async () => {
    await services.cluster?.keeper.drain();
    // As startServer's stop: keep serving (forwarding to the new owners) for DRAIN_GRACE_SECONDS, so no request
    // another node forwarded here meets a closing listener or an idle connection being closed.
    if (config.cluster) await new Promise((resolve) => setTimeout(resolve, config.cluster?.drainGraceMs));
    await app.close();
    await services.close();
    process.exit(0);
  })();
});

say({ ready: true, port, workerId: services.webhooks.id });
