import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { openStore } from '../../src/store/database.ts';
import type { Handlers } from '../lib/ipc.ts';
import { createBenchOrg } from '../lib/org.ts';
import { profilingHandlers } from '../lib/profiling-handlers.ts';
import { cpuMicros, sleep } from '../lib/stats.ts';

/**
 * parley under test, in a process of its own, built exactly as `startServer` builds it (createServices +
 * buildApp, listening on 127.0.0.1) with a fresh store: SQLite in a temp folder, or a fresh schema of the
 * PostgreSQL server at `databaseUrl`. Setup makes an enterprise organization with limits no benchmark reaches,
 * one `svc_test_` key and `instances` sandbox instances logged in through the public API (connect + scan), each
 * with an HMAC key and a webhook to the benchmark receiver.
 */

/** The phone that sends the inbound events and receives the sent messages (registered by the sandbox rules). */
export const PEER_PHONE = '5511988887777';

/** Arguments of `setup`. */
export interface ParleySetup {
  dialect: 'sqlite' | 'postgres';
  /** PostgreSQL URL (dialect postgres). */
  databaseUrl?: string;
  /** Sandbox instances to log in. */
  instances: number;
  /** Webhook URL of every instance (the receiver), or null for none. */
  webhookUrl: string | null;
  hmacKey: string;
  /** Log level of the service (default `warn`: request logging off, as in the baseline). */
  logLevel?: string;
  /** `WEBHOOK_LANE_WINDOW`: webhook requests in flight per lane (default: the service's, `DEFAULT_LANE_WINDOW` of src/config/env.ts). */
  laneWindow?: number;
  /** `DATABASE_PREPARED_STATEMENTS=off` (PostgreSQL: statements unnamed, parsed and planned at every run). */
  unprepared?: boolean;
}

/** What `setup` returns to the runner. */
export interface ParleyReady {
  url: string;
  key: string;
  instanceIds: string[];
}

interface Running {
  app: FastifyInstance;
  services: Services;
  instanceIds: string[];
  cleanup: () => Promise<void>;
}

let running: Running | undefined;

function current(): Running {
  if (!running) throw new Error('setup has not run');
  return running;
}

async function setup(args: ParleySetup): Promise<ParleyReady> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-bench-'));
  const schema = args.dialect === 'postgres' ? `bench_${randomBytes(6).toString('hex')}` : undefined;
  const config = loadConfig({
    DATA_DIR: dataDir,
    LOG_LEVEL: args.logLevel ?? 'warn',
    SECRET_KEY: randomBytes(32).toString('hex'),
    WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
    ...(args.laneWindow === undefined ? {} : { WEBHOOK_LANE_WINDOW: String(args.laneWindow) }),
    ...(args.dialect === 'postgres' ? { DATABASE_URL: args.databaseUrl } : {}),
    ...(args.unprepared ? { DATABASE_PREPARED_STATEMENTS: 'off' } : {}),
  });
  const logger = pino({ level: config.logLevel }, pino.destination(2));
  const store = await openStore(config.database, schema === undefined ? {} : { schema });
  const services = await createServices(config, {
    logger,
    store,
    outboundCa: readFileSync(new URL('../../test/fixtures/tls/cert.pem', import.meta.url)),
  });
  const app = await buildApp(services);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const db = store.db;
  const { orgId, key } = await createBenchOrg(db, 'bench', 'test');
  const instanceIds: string[] = [];
  const call = async (method: 'POST' | 'GET', path: string, payload: object) => {
    const response = await app.inject({
      method,
      url: path,
      headers: { authorization: `Bearer ${key}` },
      payload,
    });
    if (response.statusCode !== 200) throw new Error(`${path}: ${response.statusCode} ${response.body}`);
  };
  for (let i = 0; i < args.instances; i++) {
    const instance = await adminCreateInstance(db, { org: orgId, env: 'test', name: `bench-${i}` });
    const from = `from=${instance.id}`;
    await call('POST', `/v1/session/connect?${from}`, {});
    await call('POST', `/v1/sandbox/scan?${from}`, { phone: `55119${String(i).padStart(8, '0')}` });
    await call('POST', `/v1/session/hmac/config?${from}`, { hmacKey: args.hmacKey });
    if (args.webhookUrl !== null) await call('POST', `/v1/webhook?${from}`, { webhookUrl: args.webhookUrl });
    instanceIds.push(instance.id);
  }
  running = {
    app,
    services,
    instanceIds,
    cleanup: async () => {
      await app.close();
      await services.close();
      if (schema !== undefined && args.databaseUrl) {
        const client = new pg.Client({ connectionString: args.databaseUrl });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return { url, key, instanceIds };
}

/**
 * Makes `count` inbound messages arrive from {@link PEER_PHONE}, spread evenly over the instances, through
 * each session's sandbox `inbound` (the engine path a platform message takes: the event is recorded with its
 * message row and outbox row in one transaction). `ratePerSecond` 0 = as fast as the service records them
 * (one sequential loop per instance); otherwise events are started on that schedule.
 * @returns epoch ms when generation started and when the last event was recorded.
 */
async function generate(args: {
  count: number;
  ratePerSecond: number;
}): Promise<{ startedAt: number; recordedAt: number }> {
  const { services, instanceIds } = current();
  const sessions = instanceIds.map((id) => {
    const controls = services.sessions.existing(id)?.sandbox;
    if (!controls) throw new Error(`instance ${id} has no sandbox session`);
    return controls;
  });
  const inbound = (k: number) =>
    sessions[k % sessions.length]?.inbound({ phone: PEER_PHONE, body: `bench event ${k}` });
  const startedAt = Date.now();
  if (args.ratePerSecond <= 0) {
    await Promise.all(
      sessions.map(async (_, lane) => {
        for (let k = lane; k < args.count; k += sessions.length) await inbound(k);
      }),
    );
  } else {
    const pending: Promise<unknown>[] = [];
    let k = 0;
    while (k < args.count) {
      const due = Math.min(
        args.count,
        Math.floor(((Date.now() - startedAt) * args.ratePerSecond) / 1000) + 1,
      );
      while (k < due) pending.push(inbound(k++) ?? Promise.resolve());
      await sleep(2);
    }
    await Promise.all(pending);
  }
  return { startedAt, recordedAt: Date.now() };
}

/** Delivery rows by status (`pending`, `delivered`, `failed`). */
async function deliveries(): Promise<Record<string, number>> {
  const rows = await current()
    .services.store.db.selectFrom('webhook_deliveries')
    .select(['status', sql<number>`count(*)`.as('n')])
    .groupBy('status')
    .execute();
  return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
}

/** Commands of the parley role. */
export const parleyHandlers: Handlers = {
  setup,
  generate,
  deliveries,
  cpu: cpuMicros,
  ...profilingHandlers(),
  async close() {
    const done = running;
    running = undefined;
    await done?.cleanup();
    return null;
  },
};
