import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { afterEach, beforeEach } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely, Transaction } from 'kysely';
import { Webhook } from 'standardwebhooks';
import type { EngineEvent, EngineMessage } from '../../src/domain/messages.ts';
import { type ClaimedDelivery, claimDeliveries } from '../../src/store/delivery-claims.ts';
import type { FinishInput } from '../../src/store/delivery-finish.ts';
import { type NextAttempt, nextAttemptOf } from '../../src/store/delivery-next.ts';
import type { Database } from '../../src/store/schema.ts';
import { type ApiResponse, createTestApp, type TestApp, type TestAppOptions } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import {
  type ReceivedRequest,
  type Receiver,
  type Responder,
  startReceiver,
  TEST_CA,
} from '../support/https-receiver.ts';
import { createTestStore, type TestStore } from '../support/store.ts';

/** A 40-character HMAC key used by the webhook suites. */
export const HMAC_KEY = 'whsec-test-0123456789-abcdefghij-KLMNOP';

/**
 * For each test of the enclosing `describe`: a real HTTPS receiver and a webhook app (`createWebhookApp(options)`)
 * whose webhook points at it (unless `configured` is false: the test configures what it needs), closed after the
 * test. → getters for both.
 */
export function webhookAppPerTest(
  options: TestAppOptions,
  { configured = true }: { configured?: boolean } = {},
): { receiver: () => Receiver; t: () => TestApp } {
  let receiver: Receiver | undefined;
  let app: TestApp | undefined;
  beforeEach(async () => {
    receiver = await startReceiver();
    app = await createWebhookApp(options);
    if (configured) {
      await configureWebhook(app, receiver.url);
      await knownReceiver(app, receiver);
    }
  });
  afterEach(async () => {
    await app?.close();
    await receiver?.close();
  });
  return {
    receiver: () => {
      if (!receiver) throw new Error('no receiver outside a test');
      return receiver;
    },
    t: () => {
      if (!app) throw new Error('no app outside a test');
      return app;
    },
  };
}

/**
 * Now on the store's clock that `t`'s due times (`run_at`) are set and judged on, epoch ms
 * (docs/decisions/0005-outbox-and-delivery.md, "Due times"): the time a test's own claim judges due times at
 * (`ClaimOptions.dueAt`). The test's business clock (`t.clock`) stays where the test put it.
 */
export function dueNow(t: TestApp): number {
  return t.services.webhooks.dueNow();
}

/**
 * Lets `ms` pass for `t`'s pending deliveries on the store's clock their due times are on
 * (docs/decisions/0005-outbox-and-delivery.md, "Due times"): each `run_at` moves `ms` earlier, so a retry waiting for
 * its backoff comes due as if that long had passed, and the business clock (attempts' and the log's times) moves `ms`
 * on.
 */
export async function letTimePass(t: TestApp, ms: number): Promise<void> {
  t.clock.advance(ms);
  await t.testStore.store.db
    .updateTable('webhook_deliveries')
    .set((eb) => ({ run_at: eb('run_at', '-', ms) }))
    .where('status', '=', 'pending')
    .execute();
}

/** The body of {@link knownReceiver}'s request: a receiver that holds its replies answers this one at once. */
export const SET_UP_BODY = '{"setUp":true}';

/**
 * Makes `t`'s outbound guard learn that `receiver` keeps its connections open, as its first answer to a lane would,
 * then forgets that request at the receiver: a lane pipelines its window only to a receiver known to keep its
 * connections (docs/decisions/0058-pipelined-lanes.md), so a test of windows starts from one that does. The request
 * takes the receiver's next reply (a 200 unless the test queued another).
 */
export async function knownReceiver(t: TestApp, receiver: Receiver): Promise<void> {
  const answer = await t.services.guard.request(receiver.url, {
    method: 'POST',
    body: SET_UP_BODY,
    timeoutMs: 10_000,
    maxResponseBytes: 1024,
    onTooLarge: 'truncate',
  });
  assert.equal(answer.status, 200, 'the receiver answered the set-up request');
  receiver.forget();
}

/** A test app whose webhook worker trusts the test CA, may reach 127.0.0.1 and polls fast. */
export async function createWebhookApp(options: TestAppOptions = {}): Promise<TestApp> {
  return createTestApp({
    outboundCa: TEST_CA,
    webhookWorker: { pollIntervalMs: 25, ...options.webhookWorker },
    ...options,
    env: {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
      WEBHOOK_RETRY_SCHEDULE: '1,2,3',
      WEBHOOK_TIMEOUT_SECONDS: '5',
      ...options.env,
    },
  });
}

/** A worker under a store fault (see {@link faultedWorkerPerTest}). */
export interface FaultedWorker {
  /**
   * Opens a `dialect` test store whose every statement goes through `faults` (src/store/faults.ts
   * `StoreFaultHook`) and a webhook app on it, on the pro plan, whose worker never polls on its own (claims follow
   * the recorder's signals): `env` sets its bounds (`WEBHOOK_CONCURRENCY`, `WEBHOOK_LANE_WINDOW`, …), with requests
   * timing out after 60 s unless it says otherwise.
   */
  start(
    dialect: 'sqlite' | 'postgres',
    faults: (sql: string) => void,
    env: Record<string, string>,
  ): Promise<{ store: TestStore; app: TestApp }>;
  /** A new test instance named `name` whose webhook is a new receiver answering with `respond`. */
  lane(name: string, respond: Responder): Promise<{ instance: { id: string }; receiver: Receiver }>;
  /** A responder that holds each reply (200 `ok`) until the test calls one of {@link held}. */
  holding(): Responder;
  /** Releases of the replies {@link holding} holds, oldest first; the test calls (and removes) them. */
  readonly held: (() => void)[];
  /** The most replies {@link holding} held at once. */
  readonly mostHeld: number;
}

/**
 * For each test of the enclosing `describe`: the set-up of the webhook worker's fault tests (a store with a fault
 * hook, a worker app with small bounds, receivers), with everything released and closed after the test: held
 * replies, the app, the receivers, the store.
 */
export function faultedWorkerPerTest(): FaultedWorker {
  let store: TestStore | undefined;
  let app: TestApp | undefined;
  const receivers: Receiver[] = [];
  const held: (() => void)[] = [];
  let mostHeld = 0;
  afterEach(async () => {
    for (const release of held.splice(0)) release();
    mostHeld = 0;
    await app?.close();
    app = undefined;
    for (const receiver of receivers.splice(0)) await receiver.close();
    await store?.cleanup();
    store = undefined;
  });
  const started = (): TestApp => {
    if (!app) throw new Error('start() the worker first');
    return app;
  };
  return {
    async start(dialect, faults, env) {
      store = await createTestStore(dialect, { faults });
      app = await createWebhookApp({
        dialect,
        testStore: store,
        plan: { plan: 'pro' },
        webhookWorker: { pollIntervalMs: 600_000 },
        env: { WEBHOOK_TIMEOUT_SECONDS: '60', ...env },
      });
      return { store, app };
    },
    async lane(name, respond) {
      const t = started();
      // The set-up request of `knownReceiver` is answered at once, whatever the lane's own replies.
      const receiver = await startReceiver({
        respond: (request, index) =>
          request.body.toString() === SET_UP_BODY ? { status: 200, body: 'ok' } : respond(request, index),
      });
      receivers.push(receiver);
      const instance = await t.newInstance('test', name);
      const set = await t.call('POST', `/v1/webhook?from=${instance.id}`, { webhookUrl: receiver.url });
      assert.equal(set.status, 200);
      await knownReceiver(t, receiver);
      return { instance, receiver };
    },
    holding: () => () =>
      new Promise((resolve) => {
        held.push(() => resolve({ status: 200, body: 'ok' }));
        mostHeld = Math.max(mostHeld, held.length);
      }),
    held,
    get mostHeld() {
      return mostHeld;
    },
  };
}

let counter = 0;

/** A text message event from `phone` (an inbound message unless `fromMe`). */
export function textMessage(text: string, options: { phone?: string; fromMe?: boolean; at?: number } = {}) {
  counter += 1;
  const phone = options.phone ?? '5511988887777';
  const jid = `${phone}@s.whatsapp.net`;
  const message: EngineMessage = {
    id: `3EB0${counter.toString(16).toUpperCase().padStart(16, '0')}`,
    source: { chat: jid, sender: jid, isFromMe: options.fromMe ?? false, isGroup: false },
    pushName: 'Tester',
    timestamp: options.at ?? Date.UTC(2025, 0, 2, 3, 4, 5),
    content: { kind: 'text', text },
  };
  return { type: 'message', message } satisfies EngineEvent;
}

/** Records `count` text messages on the test instance, in order; returns their texts. */
export async function recordMessages(t: TestApp, count: number, prefix = 'm'): Promise<string[]> {
  const texts: string[] = [];
  for (let i = 1; i <= count; i++) {
    const text = `${prefix}${i}`;
    await t.services.recorder.record(t.instance.id, textMessage(text));
    texts.push(text);
  }
  return texts;
}

/** Sets the webhook URL (and the HMAC key unless `hmacKey` is null) through HTTP. */
export async function configureWebhook(t: TestApp, url: string, hmacKey: string | null = HMAC_KEY) {
  if (hmacKey !== null) {
    const hmac = await t.call('POST', '/v1/session/hmac/config', { hmacKey });
    assert.equal(hmac.status, 200, JSON.stringify(hmac.body));
  }
  const set = await t.call('POST', '/v1/webhook', { webhookUrl: url });
  assert.equal(set.status, 200, JSON.stringify(set.body));
}

/** GET /v1/webhook/deliveries with `query`, asserting 200. */
export async function deliveries(t: TestApp, query = ''): Promise<ApiResponse> {
  const response = await t.call('GET', `/v1/webhook/deliveries${query ? `?${query}` : ''}`);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response;
}

/**
 * Polls the delivery log until `predicate` holds on its entries (newest first), failing after `timeoutMs`.
 * The worker is woken on every poll so due retries run without waiting for its poll interval.
 */
export async function waitForLog(
  t: TestApp,
  predicate: (entries: any[]) => boolean,
  timeoutMs = 10_000,
  query = 'limit=100',
): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  let entries: any[] = [];
  while (Date.now() < deadline) {
    entries = (await deliveries(t, query)).body.data.deliveries;
    if (predicate(entries)) return entries;
    t.services.webhooks.wake();
    await sleep(20);
  }
  assert.fail(`delivery log condition not met within ${timeoutMs} ms: ${JSON.stringify(entries, null, 1)}`);
}

/**
 * True when a log entry has exactly `count` attempts, none still in flight, and its delivery row records the
 * last one's outcome (`lastError` is that attempt's error): the attempt rows and the delivery row agree, so
 * `status` and `nextAttemptAt` describe the state after attempt `count`.
 */
export function settled(entry: any, count: number): boolean {
  const last = entry?.attempts[count - 1];
  return (
    entry?.attempts.length === count &&
    entry.attempts.every((a: any) => a.finishedAt !== null) &&
    entry.lastError === last?.error
  );
}

/**
 * Independent check of both signatures of a received webhook (docs/decisions/0006-signatures.md), with node:crypto
 * and standardwebhooks.
 */
export function assertSigned(request: ReceivedRequest, key = HMAC_KEY): void {
  const body = request.body;
  const id = String(request.headers['webhook-id']);
  const timestamp = String(request.headers['webhook-timestamp']);
  const expectedHex = createHmac('sha256', Buffer.from(key, 'utf8')).update(body).digest('hex');
  assert.equal(request.headers['x-hmac-signature'], expectedHex);
  const expectedStd = `v1,${createHmac('sha256', Buffer.from(key, 'utf8')).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
  assert.equal(request.headers['webhook-signature'], expectedStd);
  const verifier = new Webhook(new TextEncoder().encode(key), { format: 'raw' });
  const parsed = verifier.verify(body.toString('utf8'), {
    'webhook-id': id,
    'webhook-timestamp': timestamp,
    'webhook-signature': String(request.headers['webhook-signature']),
  });
  assert.deepEqual(parsed, JSON.parse(body.toString('utf8')));
}

/** The parsed JSON bodies of received requests. */
export function bodies(requests: readonly ReceivedRequest[]): any[] {
  return requests.map((request) => JSON.parse(request.body.toString('utf8')));
}

/**
 * The record of a delivered attempt (200, "ok") of `delivery` claimed by worker `w1`, at `now` (epoch ms), starting
 * `next` (a claimed delivery or its `NextAttempt`) when given.
 */
export function deliveredRecord(
  delivery: Pick<ClaimedDelivery, 'eventId' | 'endpointId' | 'instanceId' | 'attemptId' | 'lockedAt'>,
  now: number,
  next?: ClaimedDelivery | NextAttempt,
): FinishInput {
  return {
    eventId: delivery.eventId,
    endpointId: delivery.endpointId,
    instanceId: delivery.instanceId,
    attemptId: delivery.attemptId,
    workerId: 'w1',
    lockedAt: delivery.lockedAt,
    attempt: { statusCode: 200, durationMs: 3, error: null, responseBody: 'ok', responseTruncated: false },
    outcome: { kind: 'delivered' },
    now: new Date(now).toISOString(),
    ...(next === undefined ? {} : { next: 'sequence' in next ? nextAttemptOf(next) : next }),
  };
}

/**
 * The lane's rows as the delivery tests compare them: [sequence, status, attempts, locked_by] per delivery and
 * [sequence, finished?] per attempt row, both in `sequence` order.
 */
export async function laneState(
  db: Kysely<Database>,
): Promise<{ deliveries: unknown[][]; attempts: unknown[][] }> {
  return {
    deliveries: (
      await db
        .selectFrom('webhook_deliveries')
        .select(['sequence', 'status', 'attempts', 'locked_by'])
        .orderBy('sequence')
        .execute()
    ).map((row) => [Number(row.sequence), row.status, row.attempts, row.locked_by]),
    attempts: (
      await db
        .selectFrom('webhook_attempts as a')
        .innerJoin('webhook_deliveries as d', (join) =>
          join.onRef('d.event_id', '=', 'a.event_id').onRef('d.endpoint_id', '=', 'a.endpoint_id'),
        )
        .select(['d.sequence', 'a.finished_at'])
        .orderBy('d.sequence')
        .execute()
    ).map((row) => [Number(row.sequence), row.finished_at !== null]),
  };
}

/**
 * Records `count` messages on the test app's instance and claims its lane's deliveries as worker `w1` (all of them
 * in one lane batch; only the head started, as a claim starts it).
 * @returns the claimed deliveries in `sequence` order and the claim's time (epoch ms).
 */
export async function claimLane(
  t: TestApp,
  dialect: 'sqlite' | 'postgres',
  count: number,
): Promise<{ batch: ClaimedDelivery[]; now: number }> {
  await recordMessages(t, count);
  const now = t.clock();
  const batch = await claimDeliveries(t.testStore.store.db, dialect, {
    workerId: 'w1',
    now,
    dueAt: dueNow(t),
    staleBefore: t.services.webhooks.staleBefore(now),
    limit: 8,
    perLane: count,
  });
  assert.equal(batch.length, count, `${count} deliveries claimed`);
  return { batch, now };
}

/**
 * Inserts a `pending` delivery of event `eventId` (its `sequence`) to `endpointId` (`''`: the default webhook) at
 * `at` (epoch ms), no worker holding it: what a recording transaction that raced a change of the lane's routing (an
 * endpoint's deletion, a 410) leaves behind.
 */
export async function insertPendingDelivery(
  db: Kysely<Database>,
  input: { eventId: string; endpointId: string; instanceId: string; sequence: number; at: number },
): Promise<void> {
  await db
    .insertInto('webhook_deliveries')
    .values({
      event_id: input.eventId,
      endpoint_id: input.endpointId,
      instance_id: input.instanceId,
      sequence: input.sequence,
      status: 'pending',
      attempts: 0,
      max_attempts: 10,
      run_at: input.at,
      locked_by: null,
      locked_at: null,
      last_error: null,
      last_status: null,
      delivered_at: null,
      created_at: input.at,
      updated_at: input.at,
    })
    .execute();
}

/**
 * `db` (and the transactions it opens) whose `deleteFrom` statements call `hooks.before(inTransaction)` before each
 * is carried out and `hooks.after()` once it was: the points around the retention job's deletes
 * (src/store/webhook-log.ts `pruneWebhookLog`, `pruneSendJobs`).
 */
export function watchDeletes(
  db: Kysely<Database>,
  hooks: { before?: (inTransaction: boolean) => Promise<void>; after?: () => void },
): Kysely<Database> {
  const builder = (target: object, inTransaction: boolean): object =>
    new Proxy(target, {
      get(inner, name) {
        const value = Reflect.get(inner, name, inner);
        if (typeof value !== 'function') return value;
        if (typeof name === 'string' && name.startsWith('execute')) {
          return async (...args: unknown[]) => {
            await hooks.before?.(inTransaction);
            const result = await value.apply(inner, args);
            hooks.after?.();
            return result;
          };
        }
        return (...args: unknown[]) => {
          const result = value.apply(inner, args);
          return result !== null && typeof result === 'object' && 'execute' in result
            ? builder(result, inTransaction)
            : result;
        };
      },
    });
  const handle = <T extends Kysely<Database>>(target: T, inTransaction: boolean): T =>
    new Proxy(target, {
      get(inner, name) {
        const value = Reflect.get(inner, name, inner);
        if (name === 'deleteFrom')
          return (...args: Parameters<Kysely<Database>['deleteFrom']>) =>
            builder(inner.deleteFrom(...args), inTransaction);
        if (name === 'transaction')
          return () => {
            const transaction = inner.transaction();
            return new Proxy(transaction, {
              get(tb, key) {
                const member = Reflect.get(tb, key, tb);
                if (key === 'execute')
                  return <R>(callback: (trx: Transaction<Database>) => Promise<R>) =>
                    tb.execute((trx) => callback(handle(trx, true)));
                return typeof member === 'function' ? member.bind(tb) : member;
              },
            });
          };
        return typeof value === 'function' ? value.bind(inner) : value;
      },
    });
  return handle(db, false);
}

/**
 * The ids of the messages of `t`'s instance whose content holds `text`, read from `db` (default the test store's;
 * a test whose app reaches the store through a proxy reads past it).
 */
export async function messageIdsWith(
  t: TestApp,
  text: string,
  db: Kysely<Database> = t.testStore.store.db,
): Promise<string[]> {
  const rows = await db
    .selectFrom('messages')
    .select('id')
    .where('instance_id', '=', t.instance.id)
    .where('content', 'like', `%${text}%`)
    .execute();
  return rows.map((row) => row.id);
}

/** Waits until every webhook delivery of `t`'s instance is delivered, read from `db` (as {@link messageIdsWith}). */
export async function allDelivered(t: TestApp, db: Kysely<Database> = t.testStore.store.db): Promise<void> {
  await eventually('every delivery delivered', async () => {
    const open = await db
      .selectFrom('webhook_deliveries')
      .select('status')
      .where('instance_id', '=', t.instance.id)
      .where('status', '!=', 'delivered')
      .execute();
    return open.length === 0;
  });
}

/** Errors a {@link faultingStore} throws once their statement ran: its answer lost, its outcome unknown. */
export const answerLost = new WeakSet<Error>();

/** A lost answer for {@link faultingStore}: a reset connection, thrown after the statement ran. */
export function lostAnswer(): Error {
  const error = Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
  answerLost.add(error);
  return error;
}

/**
 * `db` with every statement it runs, a transaction's too, shown to `seen` (its SQL text and parameters) and failed as
 * `fail` says by its number (from 1): an error in {@link answerLost} after the statement ran, any other before.
 */
export function faultingStore<D extends Kysely<Database>>(
  db: D,
  fail: (call: number) => Error | undefined,
  seen: (sql: string, parameters: readonly unknown[]) => void = () => undefined,
): D {
  let calls = 0;
  const wrap = <W extends Kysely<Database>>(inner: W): W =>
    new Proxy(inner, {
      get(target, property) {
        if (property === 'transaction') {
          return () => ({
            execute: <R>(work: (trx: Transaction<Database>) => Promise<R>) =>
              target.transaction().execute((trx) => work(wrap(trx))),
          });
        }
        if (property === 'executeQuery') {
          return async (...args: Parameters<typeof target.executeQuery>) => {
            calls += 1;
            const [query] = args;
            const compiled = 'compile' in query ? query.compile() : query;
            seen(compiled.sql, compiled.parameters);
            const error = fail(calls);
            if (error !== undefined && !answerLost.has(error)) throw error;
            const result = await target.executeQuery(...args);
            if (error !== undefined) throw error;
            return result;
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  return wrap(db);
}
