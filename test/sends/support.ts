import type { Kysely, KyselyPlugin } from 'kysely';
import pino from 'pino';
import { ASYNC_MAX_ATTEMPTS, SYNC_MAX_ATTEMPTS } from '../../src/app/messaging.ts';
import type { Clock } from '../../src/domain/clock.ts';
import type { OutgoingMessage, SentMessage } from '../../src/domain/messages.ts';
import { extended } from '../../src/domain/objects.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { encodeSendPayload } from '../../src/sends/payload.ts';
import { type ReportedWrite, SendQueue, type SendQueueDeps } from '../../src/sends/queue.ts';
import { type OpenStoreOptions, openStore, type Store } from '../../src/store/database.ts';
import type { Database } from '../../src/store/schema.ts';
import type { NewSendJob } from '../../src/store/send-jobs.ts';
import type { TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';

/** The chat the send queue tests send to. */
const CHAT = '5511977776666@s.whatsapp.net';

let seq = 0;

/**
 * A new text job of instance `instanceId` to {@link CHAT}, its text its id, accepted at `now` (epoch ms): synchronous
 * or queued, with the attempts the API gives each (src/app/messaging.ts). Each gets the next `seq` of this test
 * process.
 */
export function textJob(instanceId: string, id: string, mode: 'sync' | 'async', now: number): NewSendJob {
  seq += 1;
  return {
    instanceId,
    id,
    seq,
    chat: CHAT,
    kind: 'text',
    payload: encodeSendPayload({ to: CHAT, content: { kind: 'text', text: id, linkPreview: false } }),
    mode,
    runAt: now,
    sendAt: null,
    maxAttempts: mode === 'sync' ? SYNC_MAX_ATTEMPTS : ASYNC_MAX_ATTEMPTS,
    now,
  };
}

/**
 * An engine session, logged in and connected while `connected()` says so (default: always), that relays every
 * message through `send`: only what the send queue calls (`state`, `send`).
 */
export function fakeSession(
  send: (message: OutgoingMessage) => Promise<SentMessage>,
  connected: () => boolean = () => true,
): EngineSession {
  return {
    state: () => ({ connected: connected(), loggedIn: true, jid: null, phone: null, pushName: null }),
    send,
  } as unknown as EngineSession;
}

/**
 * A send queue of node `this-node` over `db` on `clock` that relays instance `instanceId` through `session` (no
 * other instance has a session), its reports given to `report`; `deps` overrides any of its deps.
 */
export function testQueue(
  clock: Clock,
  db: Kysely<Database>,
  instanceId: string,
  session: EngineSession,
  report: SendQueueDeps['report'] = async () => undefined,
  deps: Partial<SendQueueDeps> = {},
): SendQueue {
  return new SendQueue({
    db,
    session: (id) => (id === instanceId ? session : undefined),
    nodeId: 'this-node',
    clock,
    logger: pino({ level: 'silent' }),
    report,
    recordWith: (id, write) => reportAfterWrite(db, report, id, write),
    ...deps,
  });
}

/**
 * What a queue without an event recorder does with a write and its reports: the write's statements on `db` as they
 * come (no transaction: on SQLite a second connection's open transaction would hold the test store's), then each
 * report given to `report`. The services' recorder commits both together (src/events/recorder.ts `recordWith`).
 */
export async function reportAfterWrite<T>(
  db: Kysely<Database>,
  report: SendQueueDeps['report'],
  instanceId: string,
  write: ReportedWrite<T>,
): Promise<T> {
  const { result, reports } = await write(db);
  for (const each of reports) await report(instanceId, each);
  return result;
}

/** A connection reset, as the driver raises it when the store goes away. */
export function storeGone(): Error {
  return Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
}

/**
 * A second connection to the test app's store with the store's test-only fault hooks (src/store/faults.ts):
 * `faults` before each query, `lostAnswers` after each query the store carried out.
 */
export function storeWithFaults(
  t: Pick<TestApp, 'testStore'>,
  hooks: Pick<OpenStoreOptions, 'faults' | 'lostAnswers'>,
): Promise<Store> {
  const { database, schema } = t.testStore;
  return openStore(database, schema === undefined ? hooks : extended(hooks, { schema }));
}

/** Whether `promise` has settled yet, read at any time (its rejection is marked handled; await it for its value). */
export function settledFlag(promise: Promise<unknown>): () => boolean {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  return () => settled;
}

/**
 * Resolves once `queue` relays a synchronous send of instance `instanceId` at once (stored already claimed: no drain
 * of the queue under way, no job waiting; src/sends/sync-relay.ts), sending probe texts `<prefix>-1`, `<prefix>-2`, …
 * through `session` until one is, each waited for. Read through `db`; accepted at `clock()`.
 */
export async function untilRelayedAtOnce(
  queue: SendQueue,
  session: EngineSession,
  db: Kysely<Database>,
  instanceId: string,
  clock: Clock,
  prefix: string,
): Promise<void> {
  let probes = 0;
  await eventually('a synchronous send relayed at once', async () => {
    probes += 1;
    const id = `${prefix}-${probes}`;
    const wait = await queue.storeSync(session, textJob(instanceId, id, 'sync', clock()));
    const stored = await db.selectFrom('send_jobs').select('status').where('id', '=', id).executeTakeFirst();
    await wait();
    return stored?.status === 'sending';
  });
}

/**
 * Counts the drain's reads of an instance's first pending job (the statement naming `not_before`): what a pass does
 * last when it claims nothing, so a test waits for a pass to end by this count. `plugin` goes on the queue's store
 * handle (`db.withPlugin(plugin)`); `reads()` is the count so far.
 */
export function firstReadCounter(): { plugin: KyselyPlugin; reads: () => number } {
  let count = 0;
  const reading = new WeakSet<object>();
  const plugin: KyselyPlugin = {
    transformQuery({ node, queryId }) {
      if (node.kind === 'SelectQueryNode' && JSON.stringify(node).includes('"not_before"'))
        reading.add(queryId);
      return node;
    },
    async transformResult({ result, queryId }) {
      if (reading.has(queryId)) count += 1;
      return result;
    },
  };
  return { plugin, reads: () => count };
}
