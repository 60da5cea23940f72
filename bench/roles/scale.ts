import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { EVENT_TYPES } from '../../src/domain/instance.ts';
import { buildApp } from '../../src/http/app.ts';
import { SecretBox } from '../../src/security/secrets.ts';
import { createServices } from '../../src/services.ts';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import type { InstanceColumns } from '../../src/store/instances.ts';
import type { EngineAuthTable } from '../../src/store/schema.ts';
import type { Handlers } from '../lib/ipc.ts';
import { round, sleep } from '../lib/stats.ts';

/**
 * Instances at scale (scenario 4). `prepare` writes `count` logged-in sandbox instances straight into a SQLite
 * store (instance rows left connected, plus each sandbox login in the sandbox's own format: auth category
 * `creds`, id `self`, JSON `{phone, jid, pushName}` sealed with the master key); `measure`, run in a fresh process
 * started with `--expose-gc`, boots the service on that store as `startServer` does and measures what restoring
 * the sessions costs: time, and resident memory and V8 heap after full garbage collections.
 */

const BATCH = 500;

function configFor(dataDir: string, secretKeyHex: string) {
  return loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', SECRET_KEY: secretKeyHex });
}

async function prepare(args: { dataDir: string; secretKey: string; count: number }): Promise<{ ms: number }> {
  const started = performance.now();
  const config = configFor(args.dataDir, args.secretKey);
  const box = new SecretBox(Buffer.from(args.secretKey, 'hex'));
  const store = await openStore(config.database);
  try {
    await migrateToLatest(store);
    const now = Date.now();
    const orgId = randomUUID();
    await store.db
      .insertInto('organizations')
      .values({ id: orgId, name: 'scale', plan: 'free', per_minute: null, per_day: null, created_at: now })
      .execute();
    for (let first = 0; first < args.count; first += BATCH) {
      const instances: InstanceColumns[] = [];
      const creds: EngineAuthTable[] = [];
      for (let i = first; i < Math.min(args.count, first + BATCH); i++) {
        const id = randomUUID();
        const phone = `55119${String(i).padStart(8, '0')}`;
        const jid = `${phone}.0:1@s.whatsapp.net`;
        const pushName = `Sandbox ${phone.slice(-4)}`;
        instances.push({
          id,
          org_id: orgId,
          env: 'test',
          name: `scale-${i}`,
          phone,
          jid,
          push_name: pushName,
          webhook_url: null,
          subscribe: JSON.stringify(EVENT_TYPES),
          hmac_key: null,
          desired_state: 'connected',
          last_connected_at: now,
          created_at: now,
        });
        creds.push({
          instance_id: id,
          category: 'creds',
          key_id: 'self',
          value: box.seal(JSON.stringify({ phone, jid, pushName })),
          updated_at: now,
        });
      }
      await store.db.transaction().execute(async (trx) => {
        await trx.insertInto('instances').values(instances).execute();
        await trx.insertInto('engine_auth').values(creds).execute();
      });
    }
  } finally {
    await store.destroy();
  }
  return { ms: Math.round(performance.now() - started) };
}

function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the measuring process with --expose-gc');
  for (let i = 0; i < 4; i++) gc();
}

/**
 * The process's threads (`/proc/self/task` entries), or null where there is no `/proc`. A restore that writes the
 * store's log past 100 pages starts its checkpoint thread (docs/decisions/0066-checkpoint-thread-on-demand.md), which
 * shows here as two more threads and in the RSS as a cost paid once per store, not per instance (docs/benchmarks.md,
 * step 99).
 */
function threads(): number | null {
  try {
    return readdirSync('/proc/self/task').length;
  } catch {
    return null;
  }
}

function memory() {
  const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
  return { rss, heapUsed, external, arrayBuffers };
}

/** What `measure` reports; memory in bytes, times in ms. */
export interface ScaleMeasurement {
  instances: number;
  restored: number;
  sessions: number;
  /** createServices (store open, migrations check) + buildApp. */
  servicesMs: number;
  /** `sessions.restoreAll()`. */
  restoreMs: number;
  before: ReturnType<typeof memory>;
  after: ReturnType<typeof memory>;
  /** The process's threads before and after the restore (null without `/proc`). */
  threads: { before: number | null; after: number | null };
  /** (after − before) / instances, bytes. */
  perInstance: { rss: number; heapUsed: number; external: number };
}

async function measure(args: {
  dataDir: string;
  secretKey: string;
  count: number;
}): Promise<ScaleMeasurement> {
  const config = configFor(args.dataDir, args.secretKey);
  const logger = pino({ level: 'silent' });
  const t0 = performance.now();
  const services = await createServices(config, { logger });
  const app = await buildApp(services);
  await app.ready();
  const t1 = performance.now();
  collect();
  await sleep(200);
  collect();
  const before = memory();
  const threadsBefore = threads();
  const t2 = performance.now();
  const restored = await services.sessions.restoreAll();
  const t3 = performance.now();
  collect();
  await sleep(500);
  collect();
  const after = memory();
  const threadsAfter = threads();
  const sessions = services.sessions.size;
  await app.close();
  await services.close();
  const per = (key: 'rss' | 'heapUsed' | 'external') => round((after[key] - before[key]) / args.count, 0);
  return {
    instances: args.count,
    restored,
    sessions,
    servicesMs: Math.round(t1 - t0),
    restoreMs: Math.round(t3 - t2),
    before,
    after,
    threads: { before: threadsBefore, after: threadsAfter },
    perInstance: { rss: per('rss'), heapUsed: per('heapUsed'), external: per('external') },
  };
}

/** Commands of the scale role. */
export const scaleHandlers: Handlers = { prepare, measure };
