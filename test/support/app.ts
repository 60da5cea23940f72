import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { type Config, loadConfig } from '../../src/config/config.ts';
import type { Instance } from '../../src/domain/instance.ts';
import type { Engine } from '../../src/engines/engine.ts';
import { buildApp } from '../../src/http/app.ts';
import { createServices, type ServiceOptions, type Services } from '../../src/services.ts';
import type { Organization } from '../../src/store/organizations.ts';
import { createTestStore, type TestDialect, type TestStore } from './store.ts';

/** A clock tests move by hand (epoch ms). */
export interface ManualClock {
  (): number;
  advance(ms: number): void;
  set(ms: number): void;
}

/** A clock starting at `start` (default: now) that only moves when told. */
export function manualClock(start = Date.now()): ManualClock {
  let now = start;
  const clock = (() => now) as ManualClock;
  clock.advance = (ms) => {
    now += ms;
  };
  clock.set = (ms) => {
    now = ms;
  };
  return clock;
}

/** A parsed JSON response with status, headers and body. */
export interface ApiResponse {
  status: number;
  headers: LightMyRequestResponse['headers'];
  body: any;
  raw: LightMyRequestResponse;
}

/** A running test app with an org, one test instance and a `chat:*` test key. */
export interface TestApp {
  app: FastifyInstance;
  services: Services;
  testStore: TestStore;
  config: Config;
  clock: ManualClock;
  org: Organization;
  instance: Instance;
  key: string;
  /** Calls the API with `key` (or the given `authorization`); JSON body, parsed JSON response. */
  call(
    method: InjectOptions['method'],
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<ApiResponse>;
  /** Creates another key for the org (or another org's name) and returns its value. */
  newKey(options?: {
    env?: 'test' | 'live';
    scopes?: string[];
    instances?: string[];
    expiresIn?: string;
    org?: string;
  }): Promise<string>;
  /** Creates another instance of the org. */
  newInstance(env?: 'test' | 'live', name?: string): Promise<Instance>;
  /** Closes the app and services; drops the store unless it was passed in (restart tests). */
  close(): Promise<void>;
}

/** Options of {@link createTestApp}. */
export interface TestAppOptions {
  dialect?: TestDialect;
  env?: Record<string, string>;
  plan?: { plan: 'free' | 'pro' | 'enterprise'; perMinute?: number; perDay?: number };
  liveEngine?: Engine;
  /** Timing of the default live engine (keep-alive, refusal bound, jitter source, version refresh). */
  liveEngineTuning?: ServiceOptions['liveEngineTuning'];
  /** Reuse a store (restart tests): the app opens its own connection to it. */
  testStore?: TestStore;
  clock?: ManualClock;
  /** The node's store clock passed to createServices (default: the services make one over the store). */
  storeClock?: ServiceOptions['storeClock'];
  /**
   * Whether the services' send queue sets and judges due times on the node's store clock, as a node does
   * (docs/decisions/0112-send-due-times-on-the-store-clock.md); default false: on the app's manual clock, so a test's
   * scheduled sends and retries come due as it advances that clock (a single node, whose clocks agree).
   */
  sendDueOnStoreClock?: boolean;
  /**
   * Whether `Idempotency-Key` claims' locks and expiries are set and judged on the node's store clock, as a node does
   * (docs/decisions/0010-idempotency.md); default false: on the app's manual clock, so a test's claims lapse and
   * expire as it advances that clock (a single node, whose clocks agree).
   */
  idempotencyOnStoreClock?: boolean;
  /** Extra CA the outbound guard trusts (the HTTPS receiver's certificate). */
  outboundCa?: string | Buffer;
  /** Webhook worker tuning passed to createServices (fast poll, stale timeout, `start: false`). */
  webhookWorker?: ServiceOptions['webhookWorker'];
  /** Backoff of boot-restore retries, ms. */
  restoreRetry?: { baseMs: number; maxMs: number };
  /** How dashboard passwords are checked (a test counting the Argon2id checks wraps the real one). */
  verifyPassword?: ServiceOptions['verifyPassword'];
  /** Lease timing of a cluster node (`CLUSTER_SECRET` in `env`), ms: renewal period and lease lifetime. */
  cluster?: ServiceOptions['cluster'];
}

/**
 * Builds the real app on a fresh store (SQLite by default) with a manual clock, an org (plan free unless
 * told), one test instance and a `chat:*` test key. Nothing listens: requests go through `app.inject`.
 */
export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const testStore = options.testStore ?? (await createTestStore(options.dialect ?? 'sqlite'));
  const clock = options.clock ?? manualClock();
  const config = loadConfig({
    DATA_DIR: testStore.dataDir,
    LOG_LEVEL: 'silent',
    ...(testStore.database.dialect === 'postgres' ? { DATABASE_URL: testStore.database.url } : {}),
    ...options.env,
  });
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const services = await createServices(config, {
    logger,
    store: testStore.store,
    clock,
    ...(options.storeClock ? { storeClock: options.storeClock } : {}),
    ...(options.sendDueOnStoreClock ? {} : { sendDueClock: clock }),
    ...(options.idempotencyOnStoreClock ? {} : { idempotencyClock: clock }),
    ...(options.liveEngine ? { liveEngine: options.liveEngine } : {}),
    ...(options.liveEngineTuning ? { liveEngineTuning: options.liveEngineTuning } : {}),
    revocationPollMs: 50,
    ...(options.outboundCa === undefined ? {} : { outboundCa: options.outboundCa }),
    ...(options.restoreRetry === undefined ? {} : { restoreRetry: options.restoreRetry }),
    ...(options.webhookWorker === undefined ? {} : { webhookWorker: options.webhookWorker }),
    ...(options.verifyPassword === undefined ? {} : { verifyPassword: options.verifyPassword }),
    ...(options.cluster === undefined ? {} : { cluster: options.cluster }),
  });
  const app = await buildApp(services);
  await app.ready();
  const db = testStore.store.db;
  const orgName = `org-${Math.random().toString(36).slice(2, 10)}`;
  const org = await adminCreateOrg(db, { name: orgName, ...(options.plan ?? { plan: 'free' }) });
  const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'main' });
  const { key } = await adminCreateKey(db, { org: org.id, env: 'test' }, clock());
  const call: TestApp['call'] = async (method, url, body, headers = {}) => {
    const raw = await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, ...headers },
      ...(body === undefined ? {} : { payload: body as InjectOptions['payload'] }),
    });
    let parsed: unknown;
    try {
      parsed = raw.body === '' ? undefined : JSON.parse(raw.body);
    } catch {
      parsed = raw.body;
    }
    return { status: raw.statusCode, headers: raw.headers, body: parsed, raw };
  };
  return {
    app,
    services,
    testStore,
    config,
    clock,
    org,
    instance,
    key,
    call,
    async newKey(opts = {}) {
      const created = await adminCreateKey(
        db,
        {
          org: opts.org ?? org.id,
          env: opts.env ?? 'test',
          ...(opts.scopes ? { scopes: opts.scopes } : {}),
          ...(opts.instances ? { instances: opts.instances } : {}),
          ...(opts.expiresIn ? { expiresIn: opts.expiresIn } : {}),
        },
        clock(),
      );
      return created.key;
    },
    newInstance: (env = 'test', name) =>
      adminCreateInstance(db, { org: org.id, env, ...(name === undefined ? {} : { name }) }),
    async close() {
      await app.close();
      await services.close({ keepStore: true });
      if (!options.testStore) await testStore.cleanup();
    },
  };
}

/** Connects the app's instance and logs it in through the sandbox scan; returns the linked phone. */
export async function loginSandbox(
  t: TestApp,
  phone = '5511999990001',
  from = t.instance.id,
): Promise<string> {
  const connect = await t.call('POST', `/v1/session/connect?from=${from}`, {});
  if (connect.status !== 200) throw new Error(`connect failed: ${JSON.stringify(connect.body)}`);
  const scan = await t.call('POST', `/v1/sandbox/scan?from=${from}`, { phone });
  if (scan.status !== 200) throw new Error(`scan failed: ${JSON.stringify(scan.body)}`);
  return phone;
}
