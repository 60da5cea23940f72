import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import type { Handlers } from '../lib/ipc.ts';
import {
  controlPost,
  eachLimited,
  type LiveTarget,
  type MemorySample,
  type ReconnectTiming,
  settledMemory,
  waitUntil,
} from '../lib/live.ts';
import { createBenchOrg } from '../lib/org.ts';
import { profilingHandlers } from '../lib/profiling-handlers.ts';
import { sleep } from '../lib/stats.ts';

/**
 * parley's live engine under test (docs/benchmarks.md, live sessions), in a process of its own started with
 * `--expose-gc`: built as `startServer` builds it (createServices + buildApp, SQLite in a temp folder) and
 * pointed at the platform simulator with PLATFORM_URL / PLATFORM_ROOT_KEY. `boot` measures the idle process;
 * `login` links one live instance per simulated account through the public API (connect subscribed to
 * `Message`, HMAC key, webhook to the receiver, the QR from `/v1/session/qr` scanned through the simulator's
 * control API) and waits for each to be connected and logged in; `memory` measures after a settle period;
 * `waitBack` times every session's return after the runner broke their connections.
 */

interface Running {
  app: FastifyInstance;
  services: Services;
  key: string;
  orgId: string;
  instanceIds: string[];
  dataDir: string;
}

let running: Running | undefined;

function current(): Running {
  if (!running) throw new Error('boot has not run');
  return running;
}

/** Boots the service pointed at the simulator; → the idle process's memory after `settleMs` and GC. */
async function boot(args: { simUrl: string; rootKey: string; settleMs: number }): Promise<MemorySample> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-livebench-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    // Every link restarts once (515) and every drop reconnects (428), each logged as a warning or an error by
    // design; a session that does not come back fails the wait instead.
    LOG_LEVEL: 'fatal',
    SECRET_KEY: randomBytes(32).toString('hex'),
    WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
    PLATFORM_URL: args.simUrl,
    PLATFORM_ROOT_KEY: args.rootKey,
  });
  const logger = pino({ level: config.logLevel }, pino.destination(2));
  const services = await createServices(config, {
    logger,
    outboundCa: readFileSync(new URL('../../test/fixtures/tls/cert.pem', import.meta.url)),
  });
  const app = await buildApp(services);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { orgId, key } = await createBenchOrg(services.store.db, 'livebench', 'live');
  running = { app, services, key, orgId, instanceIds: [], dataDir };
  // The bot's process has Baileys' module graph loaded before its idle sample (it imports `baileys` at the top);
  // parley loads it at its first live session (docs/decisions/0068-engines-loaded-on-first-use.md), so it is
  // loaded here, before the idle sample, for both sides to count a session's memory and not the library's.
  await import('../../src/engines/baileys/index.ts');
  await startCheckpointThread(services);
  return settledMemory(args.settleMs);
}

/** Threads of this process now (`/proc/self/task`); undefined where that is not readable. */
function threadCount(): number | undefined {
  try {
    return readdirSync('/proc/self/task').length;
  } catch {
    return undefined;
  }
}

/**
 * Starts the SQLite store's checkpoint thread before the idle sample. It starts on its own once the write-ahead log
 * first holds 100 pages (docs/decisions/0066-checkpoint-thread-on-demand.md), which a fresh store's migrations leave
 * just short of (about 90), so it started during the first links and its fixed cost (a worker thread: about 10 to
 * 40 MiB of resident memory) was counted as the sessions' memory (docs/benchmarks.md, step 122). Pages are written
 * here by organization rows inserted and deleted again, and the thread is waited for (a new thread in
 * `/proc/self/task`, at most 2 s; or 500 ms where that cannot be read).
 */
async function startCheckpointThread(services: Services): Promise<void> {
  const before = threadCount();
  const db = services.store.db;
  const filler = 'x'.repeat(3000);
  for (let i = 0; i < 40; i++) {
    await db
      .insertInto('organizations')
      .values({
        id: `bench-filler-${i}`,
        name: `bench filler ${i} ${filler}`,
        plan: 'free',
        created_at: Date.now(),
      })
      .execute();
  }
  await db.deleteFrom('organizations').where('id', 'like', 'bench-filler-%').execute();
  if (before === undefined) {
    await sleep(500);
    return;
  }
  // No new thread within 2 s: it was running already (a store whose migrations wrote 100 pages).
  await waitUntil('the store checkpoint thread', () => (threadCount() ?? 0) > before, 2_000).catch(
    () => undefined,
  );
}

/** Calls the API as the live key; → the parsed body. @throws Error when the status is not 200. */
async function api(method: 'GET' | 'POST', url: string, payload?: object): Promise<{ data?: unknown }> {
  const { app, key } = current();
  const response = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${key}` },
    ...(payload ? { payload } : {}),
  });
  if (response.statusCode !== 200)
    throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
  return response.json() as { data?: unknown };
}

function stateOf(instanceId: string): { connected: boolean; loggedIn: boolean } {
  const state = current().services.sessions.existing(instanceId)?.state();
  return { connected: state?.connected ?? false, loggedIn: state?.loggedIn ?? false };
}

/** Links one live instance per phone of `target`; → ms the whole wave took. */
async function login(target: LiveTarget): Promise<{ ms: number }> {
  const run = current();
  const started = Date.now();
  await eachLimited(target.phones.length, target.concurrency, async (i) => {
    const phone = target.phones[i] ?? '';
    const instance = await adminCreateInstance(run.services.store.db, {
      org: run.orgId,
      env: 'live',
      name: `live-${i}`,
    });
    const from = `from=${instance.id}`;
    await api('POST', `/v1/session/hmac/config?${from}`, { hmacKey: target.hmacKey });
    await api('POST', `/v1/webhook?${from}`, { webhookUrl: target.webhookUrl });
    await api('POST', `/v1/session/connect?${from}`, { subscribe: ['Message'] });
    let code = '';
    await waitUntil(
      `a QR code for ${phone}`,
      async () => {
        const response = await run.app.inject({
          method: 'GET',
          url: `/v1/session/qr?${from}`,
          headers: { authorization: `Bearer ${run.key}` },
        });
        if (response.statusCode !== 200) return false;
        code = (response.json() as { data: { code: string } }).data.code;
        return code !== '';
      },
      60_000,
    );
    await controlPost(target.control, '/scan', { code, phone });
    await waitUntil(
      `${phone} logged in`,
      () => {
        const state = stateOf(instance.id);
        return state.connected && state.loggedIn;
      },
      120_000,
    );
    run.instanceIds.push(instance.id);
  });
  return { ms: Date.now() - started };
}

/**
 * Waits until every session has been seen disconnected and then connected and logged in again, polling every
 * 20 ms; times are from `since` (epoch ms, the runner's clock, the same machine's).
 */
async function waitBack(args: { since: number; timeoutMs: number }): Promise<ReconnectTiming> {
  const { instanceIds } = current();
  const down = new Set<string>();
  const back = new Map<string, number>();
  const deadline = args.since + args.timeoutMs;
  while (back.size < instanceIds.length) {
    if (Date.now() > deadline) {
      throw new Error(
        `${back.size}/${instanceIds.length} sessions back after ${args.timeoutMs} ms (${down.size} seen down)`,
      );
    }
    for (const id of instanceIds) {
      if (back.has(id)) continue;
      const state = stateOf(id);
      const up = state.connected && state.loggedIn;
      if (!up) down.add(id);
      else if (down.has(id)) back.set(id, Date.now() - args.since);
    }
    await sleep(20);
  }
  const backMs = [...back.values()].sort((a, b) => a - b);
  return { allBackMs: backMs.at(-1) ?? 0, backMs };
}

/** Commands of the live-parley role. */
export const liveParleyHandlers: Handlers = {
  boot,
  login,
  async memory(args: { settleMs: number }) {
    return settledMemory(args.settleMs);
  },
  waitBack,
  // The inbound phase only (`--profile`); allocations are not sampled, since this phase's figures are measured while
  // it runs.
  ...profilingHandlers({ allocations: false }),
  async close() {
    const done = running;
    running = undefined;
    if (!done) return null;
    await done.app.close();
    await done.services.close();
    rmSync(done.dataDir, { recursive: true, force: true });
    return null;
  },
};
