import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { Instance } from '../../src/domain/instance.ts';
import type { Database } from '../../src/store/schema.ts';
import type { ReceivedRequest, ReceiverReply } from '../support/https-receiver.ts';
import type { TestStore } from '../support/store.ts';
import { HMAC_KEY } from './support.ts';

/** The simulated user the crash tests' messages come from. */
export const PEER = '5511988880002';

const ENTRY = fileURLToPath(new URL('../support/child-service.ts', import.meta.url));
const CA_FILE = fileURLToPath(new URL('../fixtures/tls/cert.pem', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The safety net of the wait for a child's ready line, ms: not a speed check. The wait ends at the ready line, or at
 * once when the child exits; this bound only ends a child that hangs without either. A boot is the child compiling
 * its module graph through tsx and opening its store, CPU work that stretches with the machine's load: a slow machine
 * under the suite's load took over 30 s, and on a 2-core machine at a load of about 25 (other suites running beside)
 * three cluster nodes in a row passed 60 s in 4 runs of 4. It sits under the runner's bound on each test
 * (scripts/test.js, 10 minutes), whose cancellation would not show the child's stderr.
 */
const CHILD_READY_MS = 180_000;

/** A running child service (see test/support/child-service.ts). */
export interface Child {
  port: number;
  workerId: string;
  /**
   * `count` messages `prefix1…prefixN` arrive on `instanceId` from a simulated user, one after the other, through
   * `POST /v1/sandbox/inbound` (each answered once its event is committed).
   */
  inbound(key: string, instanceId: string, count: number, prefix: string): Promise<void>;
  /** Calls the child's API with `key`. */
  call(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** True while the process has not exited. */
  alive(): boolean;
  /** The last 4,000 characters the process wrote to stderr (its log at CHILD_LOG_LEVEL). */
  stderr(): string;
  /** SIGSTOP: the process hangs with its connections open (a frozen machine, a partition); {@link resume} undoes it. */
  pause(): void;
  /** SIGCONT after {@link pause}. */
  resume(): void;
  /** SIGKILL, resolving when the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (graceful stop), resolving with the exit code. */
  terminate(): Promise<number | null>;
}

/** Environment shared by every child of one test: the store, the master key and fast webhook settings. */
export function childEnv(testStore: TestStore, secretKey: string): Record<string, string> {
  const database =
    testStore.database.dialect === 'sqlite' ? `sqlite:${testStore.database.path}` : testStore.database.url;
  return {
    DATABASE_URL: database,
    DATA_DIR: testStore.dataDir,
    SECRET_KEY: secretKey,
    LOG_LEVEL: 'silent',
    WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
    WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2,0.5,0.5,1,1',
    WEBHOOK_TIMEOUT_SECONDS: '2',
    OUTBOUND_CA_FILE: CA_FILE,
    CHILD_POLL_MS: '50',
    CHILD_STALE_MS: '1500',
    ...(testStore.schema ? { CHILD_PG_SCHEMA: testStore.schema } : {}),
  };
}

/** A fresh 32-byte master key, hex (`SECRET_KEY`). */
export function newSecretKey(): string {
  return randomBytes(32).toString('hex');
}

/** Connects `instanceId` and sets its HMAC key ({@link HMAC_KEY}) and webhook URL `url`, asserting each 200. */
export async function configure(child: Child, key: string, instanceId: string, url: string) {
  const from = `?from=${instanceId}`;
  const steps: [string, unknown][] = [
    [`/v1/session/connect${from}`, {}],
    [`/v1/session/hmac/config${from}`, { hmacKey: HMAC_KEY }],
    [`/v1/webhook${from}`, { webhookUrl: url }],
  ];
  for (const [path, body] of steps) {
    const response = await child.call('POST', path, key, body);
    assert.equal(response.status, 200, `${path}: ${JSON.stringify(response.body)}`);
  }
}

/**
 * Connects `instanceId`, sets its HMAC key and webhook URL, then logs it in through the sandbox scan (whose
 * HistorySync is the instance's first event sent, `sequence` 3 after the SessionStatus qr and connected, which
 * are recorded but not subscribed).
 */
export async function prepare(child: Child, key: string, instanceId: string, url: string, phone: string) {
  await configure(child, key, instanceId, url);
  const path = `/v1/sandbox/scan?from=${instanceId}`;
  const response = await child.call('POST', path, key, { phone });
  assert.equal(response.status, 200, `${path}: ${JSON.stringify(response.body)}`);
}

/** Starts a child service with `env` and worker id `workerId`; resolves once it listens. */
export async function startChild(env: Record<string, string>, workerId: string): Promise<Child> {
  const proc: ChildProcessWithoutNullStreams = spawn(process.execPath, ['--import', 'tsx', ENTRY], {
    cwd: ROOT,
    env: { ...process.env, ...env, CHILD_WORKER_ID: workerId },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const waiters: ((line: any) => boolean)[] = [];
  let buffer = '';
  let stderr = '';
  proc.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  proc.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let newline = buffer.indexOf('\n');
    while (newline >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      newline = buffer.indexOf('\n');
      // The service's own lines are JSON objects; a dependency may print to stdout too (libsignal logs
      // "Closing session: …" with console.info when a live session's Signal session is replaced).
      if (!line.startsWith('{')) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        continue;
      }
      const index = waiters.findIndex((waiter) => waiter(parsed));
      if (index >= 0) waiters.splice(index, 1);
    }
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  // A test process that ends early (a failure, a timeout) takes its children with it.
  const reap = () => proc.kill('SIGKILL');
  process.once('exit', reap);
  void exited.then(() => process.off('exit', reap));
  const next = (predicate: (line: any) => boolean, what: string) =>
    new Promise<any>((resolve, reject) => {
      const timer = setTimeout(() => {
        // A child that never got ready must not outlive the test.
        proc.kill('SIGKILL');
        reject(new Error(`child: no ${what} within ${CHILD_READY_MS / 1000} s; stderr: ${stderr}`));
      }, CHILD_READY_MS);
      void exited.then(() => reject(new Error(`child exited before ${what}; stderr: ${stderr}`)));
      waiters.push((line) => {
        if (!predicate(line)) return false;
        clearTimeout(timer);
        resolve(line);
        return true;
      });
    });
  const ready = await next((line) => line.ready === true, 'ready line');
  let exitedAlready = false;
  void exited.then(() => {
    exitedAlready = true;
  });
  const child: Child = {
    port: ready.port,
    workerId: ready.workerId,
    async inbound(key, instanceId, count, prefix) {
      for (let i = 1; i <= count; i++) {
        const sent = await child.call('POST', `/v1/sandbox/inbound?from=${instanceId}`, key, {
          phone: PEER,
          body: `${prefix}${i}`,
        });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
      }
    },
    async call(method, path, key, body) {
      const response = await fetch(`http://127.0.0.1:${ready.port}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: await response.json() };
    },
    alive: () => !exitedAlready,
    stderr: () => stderr,
    pause() {
      if (!exitedAlready) proc.kill('SIGSTOP');
    },
    resume() {
      if (!exitedAlready) proc.kill('SIGCONT');
    },
    async kill() {
      if (!exitedAlready) proc.kill('SIGKILL');
      await exited;
    },
    async terminate() {
      if (!exitedAlready) proc.kill('SIGTERM');
      return exited;
    },
  };
  return child;
}

/**
 * An org, `count` instances and a `chat:*` key, created directly in the store, in `options.env` (default `test`:
 * sandbox instances and a test key; `live` for the platform). The org is on the pro plan, or with `unlimited` on
 * an enterprise plan whose limits traffic tests never reach (several nodes share one Redis window: a steady stream
 * through three nodes passes pro's minute).
 */
export async function seed(
  testStore: TestStore,
  count: number,
  options: { unlimited?: boolean; env?: 'test' | 'live' } = {},
): Promise<{ instances: Instance[]; key: string }> {
  const env = options.env ?? 'test';
  const db = testStore.store.db;
  const name = `crash-${randomBytes(4).toString('hex')}`;
  const org = await adminCreateOrg(
    db,
    options.unlimited
      ? { name, plan: 'enterprise', perMinute: 1_000_000, perDay: 1_000_000_000 }
      : { name, plan: 'pro' },
  );
  const instances: Instance[] = [];
  for (let i = 0; i < count; i++) {
    instances.push(await adminCreateInstance(db, { org: org.id, env, name: `i${i}` }));
  }
  const { key } = await adminCreateKey(db, { org: org.id, env }, Date.now());
  return { instances, key };
}

/** Event ids the receiver answered with a completed 200, with how many times each. */
export function deliveredIds(requests: readonly ReceivedRequest[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const request of requests) {
    if (request.reply.state !== 'completed' || request.reply.status !== 200) continue;
    const id = String(request.headers['webhook-id']);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** Polls `check` until it returns true, failing after `timeoutMs` with `what`. */
export async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  assert.fail(`${what}: not within ${timeoutMs} ms`);
}

/** A receiver that answers 200 to the first `okBudget` requests after each `allow`, and holds the rest. */
export function gate() {
  let budget = 0;
  let open = false;
  let release: () => void = () => undefined;
  let released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const respond = async (): Promise<ReceiverReply> => {
    if (!open && budget <= 0) await released;
    else budget -= 1;
    return { status: 200, body: 'ok' };
  };
  return {
    respond,
    /** Answer the next `n` requests at once, then hold again. */
    allow(n: number) {
      budget = n;
    },
    /** Answer every request, including those held now. */
    openAll() {
      open = true;
      release();
    },
    /** Hold every new request again. */
    close() {
      open = false;
      budget = 0;
      released = new Promise<void>((resolve) => {
        release = resolve;
      });
    },
  };
}

/** Every delivery row, in `instance_id` then `sequence` order. */
export async function deliveryRows(db: Kysely<Database>) {
  return db.selectFrom('webhook_deliveries').selectAll().orderBy('instance_id').orderBy('sequence').execute();
}
