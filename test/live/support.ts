/**
 * parley with a live key against an in-process platform simulator: the app (real services, real Baileys live
 * engine) is pointed at the simulator with PLATFORM_URL / PLATFORM_ROOT_KEY, a live instance and a live key are
 * created, and the simulator's control API is called over HTTP.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { User } from '../../sim/model/accounts.ts';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';
import type { ApiResponse, ManualClock, TestApp, TestAppOptions } from '../support/app.ts';
import type { TestDialect, TestStore } from '../support/store.ts';
import { createWebhookApp } from '../webhooks/support.ts';

/**
 * The safety net of a wait for a condition ({@link until}, {@link waitForStatus}), ms: not a speed check. A wait ends
 * as soon as its condition holds; this bound only turns a condition that never comes into a failure naming what was
 * awaited. What the live tests wait for (a pairing, a login, a webhook, a stored row) has no bound of its own worth
 * checking here, only key generation, handshakes and store writes that a loaded 2-core machine makes slow (links of
 * the live cluster took past 30 s in a full run, test/nodes/live-cluster.ts; a fixed 20 s failed under load). So it
 * sits well above that, and under the runner's bound on each test (scripts/test.js, 10 minutes), whose cancellation
 * would not name what was awaited. A test that checks a bound (a reconnect within its backoff, a close within its
 * handshake) passes that bound instead.
 */
export const WAIT_MS = 120_000;

/**
 * Re-checks `check` every 25 ms until it returns a value other than undefined, and resolves with that value; fails
 * after `ms` (default {@link WAIT_MS}, a safety net) naming `what`.
 */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  ms = WAIT_MS,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A simulator started with the test log level. */
export function startTestSimulator(): Promise<Simulator> {
  return startSimulator({ log: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }) });
}

/** Calls the simulator's control API; resolves with status and parsed JSON body. */
/**
 * The simulated user of `phone` on `sim` (its inbox, keys and devices), asserting that it exists.
 * @throws AssertionError when the simulator has no user of that number.
 */
export function simulatedUser(sim: Simulator, phone: string): User {
  const found = sim.context.accounts.get(phone);
  assert.ok(found, `simulated user ${phone}`);
  return found;
}

export async function control(
  sim: Simulator,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const response = await fetch(`${sim.control}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

const caFiles = new WeakMap<Simulator, string>();
const caDirs = new Set<string>();
process.once('exit', () => {
  for (const dir of caDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * A PEM file holding `sim`'s media CA (what parley's PLATFORM_CA_FILE names), written once per simulator in a
 * temporary folder removed when the test process exits.
 */
export function simCaFile(sim: Simulator): string {
  let file = caFiles.get(sim);
  if (!file) {
    const dir = mkdtempSync(join(tmpdir(), 'parley-sim-ca-'));
    caDirs.add(dir);
    file = join(dir, 'media-ca.pem');
    writeFileSync(file, sim.mediaCa);
    caFiles.set(sim, file);
  }
  return file;
}

/** A parley app pointed at `sim`, with a way to call it as one live instance. */
export interface LiveApp {
  t: TestApp;
  instanceId: string;
  liveKey: string;
  /** Calls the API with the live key for the live instance (`from` added to the query). */
  live(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
  ): Promise<ApiResponse>;
  /** GET /v1/session/status's `data`. */
  status(): Promise<{
    connected: boolean;
    loggedIn: boolean;
    jid?: string;
    reason?: string;
    pendingSends?: number;
  }>;
}

/**
 * Builds a parley app on `dialect` (or on `testStore`, for restarts and second processes) pointed at `sim`.
 * Reuses `existing` instance and key when given, else creates a live instance and a live key.
 */
export async function liveApp(
  sim: Simulator,
  options: {
    dialect?: TestDialect;
    testStore?: TestStore;
    existing?: { instanceId: string; liveKey: string };
    /** parley's clock (default: a manual clock frozen at creation; QR expiry needs one that follows real time). */
    clock?: ManualClock;
    /** Give parley the simulator's media CA as PLATFORM_CA_FILE (default true). */
    trustMediaCa?: boolean;
    /** Timing of the live engine (keep-alive interval, refusal bound). */
    tuning?: TestAppOptions['liveEngineTuning'];
    /** Backoff of boot-restore retries, ms (default the service's: 1,000 doubling to 60,000). */
    restoreRetry?: TestAppOptions['restoreRetry'];
  } = {},
): Promise<LiveApp> {
  const t = await createWebhookApp({
    ...(options.dialect ? { dialect: options.dialect } : {}),
    ...(options.testStore ? { testStore: options.testStore } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.tuning ? { liveEngineTuning: options.tuning } : {}),
    ...(options.restoreRetry ? { restoreRetry: options.restoreRetry } : {}),
    // Status is polled while the engine works: a plan whose limits polling never reaches.
    plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 1_000_000_000 },
    env: {
      PLATFORM_URL: sim.url,
      PLATFORM_ROOT_KEY: sim.rootKey.toString('hex'),
      ...(options.trustMediaCa === false ? {} : { PLATFORM_CA_FILE: simCaFile(sim) }),
    },
  });
  const instanceId = options.existing?.instanceId ?? (await t.newInstance('live', 'sim')).id;
  const liveKey = options.existing?.liveKey ?? (await t.newKey({ env: 'live' }));
  const live: LiveApp['live'] = (method, url, body) => {
    const separator = url.includes('?') ? '&' : '?';
    return t.call(method, `${url}${separator}from=${instanceId}`, body, {
      authorization: `Bearer ${liveKey}`,
    });
  };
  return {
    t,
    instanceId,
    liveKey,
    live,
    status: async () => (await live('GET', '/v1/session/status')).body.data,
  };
}

/**
 * Connects the live instance (subscribed to the webhook event types `subscribe`, when given), scans its QR as account
 * `phone` and waits for connected + logged in ({@link waitForStatus}: as long as the link takes, with a safety net).
 */
export async function pairLive(
  sim: Simulator,
  app: LiveApp,
  phone: string,
  subscribe?: readonly string[],
): Promise<void> {
  const connect = await app.live(
    'POST',
    '/v1/session/connect',
    subscribe === undefined ? undefined : { subscribe },
  );
  assert.equal(connect.status, 200, JSON.stringify(connect.body));
  const qr = await app.live('GET', '/v1/session/qr');
  assert.equal(qr.status, 200, JSON.stringify(qr.body));
  const scan = await control(sim, 'POST', '/scan', { code: qr.body.data.code, phone });
  assert.equal(scan.status, 200, JSON.stringify(scan.body));
  await waitForStatus(app, true, true);
}

/**
 * The safety net of a wait for a session's status ({@link waitForStatus}), ms: {@link WAIT_MS}. A pairing or a login
 * has no bound of its own worth checking here (no backoff is involved in a pairing: the restart after the link
 * reconnects at once).
 */
export const STATUS_WAIT_MS = WAIT_MS;

/**
 * How often {@link waitForStatus} reads the status when no committed status change told it to, ms: a change no event
 * is committed for (a login whose recording failed) is still seen, without the 25 ms polling of {@link until}
 * competing for the CPU with the session it waits for.
 */
const STATUS_POLL_MS = 250;

/**
 * Waits until the status shows `connected` and `loggedIn`, and resolves with it: read again at each status change the
 * app commits (its live feed, src/events/live-feed.ts) and every {@link STATUS_POLL_MS} ms besides. Fails after
 * {@link STATUS_WAIT_MS} naming the last status read.
 */
export async function waitForStatus(
  app: LiveApp,
  connected: boolean,
  loggedIn: boolean,
): Promise<Awaited<ReturnType<LiveApp['status']>>> {
  let changed = false;
  let wake: () => void = () => undefined;
  const unsubscribe = app.t.services.feed.subscribe(app.instanceId, (change) => {
    if (change !== 'status') return;
    changed = true;
    wake();
  });
  const deadline = Date.now() + STATUS_WAIT_MS;
  try {
    for (;;) {
      changed = false;
      const s = await app.status();
      if (s.connected === connected && s.loggedIn === loggedIn) return s;
      if (Date.now() > deadline)
        assert.fail(
          `timed out after ${STATUS_WAIT_MS} ms waiting for status ${connected},${loggedIn}; ` +
            `last status ${JSON.stringify(s)}`,
        );
      // A change committed while the status was read is read at once.
      if (changed) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, STATUS_POLL_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = () => undefined;
    }
  } finally {
    unsubscribe();
  }
}

/**
 * The `SessionStatus` events recorded for `app`'s instance (its connect subscribed to them), oldest first: `status`
 * and `reason`.
 */
export async function sessionStatuses(app: LiveApp): Promise<{ status: string; reason?: string }[]> {
  const rows = await app.t.services.store.db
    .selectFrom('webhook_events')
    .select('payload')
    .where('instance_id', '=', app.instanceId)
    .where('type', '=', 'SessionStatus')
    .orderBy('sequence')
    .execute();
  return rows.map((row) => {
    const { status, reason } = (JSON.parse(row.payload) as { event: { status: string; reason?: string } })
      .event;
    return reason === undefined ? { status } : { status, reason };
  });
}

/**
 * How many `SessionStatus` events are recorded for `app`'s instance once the last is `connected` (waited for up to
 * `ms`, default the safety net {@link WAIT_MS}): the status endpoint can read as connected a moment before that event is recorded, so a test counting the
 * events that follow waits here first.
 */
export function statusesUntilConnected(app: LiveApp, ms = WAIT_MS): Promise<number> {
  return until(
    'the connection recorded',
    async () => {
      const statuses = await sessionStatuses(app);
      return statuses.at(-1)?.status === 'connected' ? statuses.length : undefined;
    },
    ms,
  );
}

/** The simulator's view of `phone`'s companion device 1. */
export async function companion(
  sim: Simulator,
  phone: string,
): Promise<{ id: number; linked: boolean; sockets: number }> {
  return (await control(sim, 'GET', `/accounts/${phone}`)).body.devices[1];
}

/**
 * Simulator accounts for one suite, their phone numbers counting up from `firstPhone` (one range per suite, so
 * suites never share an account). `next` makes one; `linkedPair` links a fresh one to the app's live instance
 * (logging the previous one out) and makes a friend of it. `sim` and `app` are read at each call: a suite makes
 * them in its `before`.
 */
export function simulatorAccounts(
  sim: () => Simulator,
  app: () => LiveApp,
  firstPhone: number,
): { next(): Promise<string>; linkedPair(): Promise<{ account: string; friend: string }> } {
  let phone = firstPhone;
  const next = async () => {
    phone += 1;
    const account = String(phone);
    assert.equal((await control(sim(), 'POST', '/users', { phone: account })).status, 201);
    return account;
  };
  return {
    next,
    linkedPair: async () => {
      const account = await next();
      const friend = await next();
      if ((await app().status()).loggedIn)
        assert.equal((await app().live('POST', '/v1/session/logout')).status, 200);
      await pairLive(sim(), app(), account);
      return { account, friend };
    },
  };
}
