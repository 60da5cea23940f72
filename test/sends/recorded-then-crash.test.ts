/**
 * A send job whose message was recorded and whose process stopped before the job was finished
 * (docs/decisions/0105-recorded-sends-end-sent-at-the-hand-back.md). A relayed job is marked `sent` in the recorder's
 * transaction that records its `message` event, except on PostgreSQL when the mark rides on the sequence's advance
 * (a request waits for the job) and a receipt is held for the job: the mark then leaves the job `sending` for its
 * relay's own finish (docs/decisions/0104-receipts-before-their-send.md). A process that dies between that commit and
 * the finish left the job `sending`, and the next holder's hand-back made it `pending` and relayed it a second time.
 * Now the hand-back ends a `sending` job whose message is recorded `sent`: never relayed again, its outcome reported
 * (or answered to a request waiting on the new holder) and its held receipts recorded after it. A node's crash is
 * simulated as in test/sends/interrupted-relays.test.ts: its relay never returns, its queue stops, and a queue of
 * another node, with a recorder of its own, takes the instance over. On SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import pino from 'pino';
import type { EngineEvent, OutgoingMessage, SentMessage } from '../../src/domain/messages.ts';
import { HeldReceipts } from '../../src/events/held-receipts.ts';
import { MessageCopies } from '../../src/events/message-copies.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { OutboxProjection } from '../../src/events/outbox-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { storedOutcome } from '../../src/sends/outcomes.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { recordSendStatus, recordWithStatus } from '../../src/sends/status-events.ts';
import { insertMessages } from '../../src/store/messages.ts';
import { recorderTurns } from '../../src/store/recorder-turns.ts';
import { reclaimSendingJobs } from '../../src/store/send-job-claims.ts';
import { findSendJob, insertSendJob } from '../../src/store/send-jobs.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from '../webhooks/support.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

/** The chat of {@link textJob}'s jobs, whose receipts are held for them. */
const CHAT = '5511977776666@s.whatsapp.net';
const T0 = Date.parse('2026-12-07T08:00:00.000Z');

/** The account's own `message` event for job `id`, as an engine records a relay's message. */
function ownMessage(id: string): EngineEvent {
  const { message } = textMessage(`sent as ${id}`, { fromMe: true });
  return {
    type: 'message',
    message: { ...message, id, source: { ...message.source, chat: CHAT, sender: CHAT } },
  };
}

/** The recipient's `read` receipt of message `id`. */
function readReceipt(id: string): EngineEvent {
  return {
    type: 'receipt',
    state: 'read',
    messageIds: [id],
    source: { chat: CHAT, sender: CHAT, isFromMe: false, isGroup: false },
    timestamp: T0 - 1_000,
  };
}

for (const dialect of testDialects()) {
  describe(`a send job whose message was recorded before its process stopped [${dialect}]`, () => {
    let testStore: TestStore;
    let instanceId: string;
    let now = T0;
    const clock = () => now;
    /** The queues of the nodes a test left alive, stopped after it. */
    const queues: SendQueue[] = [];
    /** The messages each node's session relayed, by node. */
    const relayed = new Map<string, string[]>();

    beforeEach(async () => {
      now = T0;
      relayed.clear();
      testStore = await createTestStore(dialect);
      const t = await createWebhookApp({ dialect, testStore });
      // A webhook, so that the recorder writes the instance's events (read back as the outcome's evidence).
      await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
      instanceId = t.instance.id;
      await t.close();
    });
    afterEach(async () => {
      for (const queue of queues.splice(0)) await queue.stop(10);
      await testStore.cleanup();
    });

    /**
     * A node `nodeId` of the services: its own event recorder (message store and webhook outbox, with the held
     * receipts and copies, as src/wiring/sessions.ts and webhooks.ts make them; on PostgreSQL with the turns' shared
     * transactions) and its send queue, which relays instance `instanceId` through a session that records each
     * relayed message as the node's own `message` event and then runs `afterRecord` (a crash never returns).
     */
    function node(nodeId: string, afterRecord: (id: string) => Promise<void> = async () => undefined) {
      const db = testStore.store.db;
      const copies = new MessageCopies(clock, pino({ level: 'silent' }));
      const held = new HeldReceipts();
      const recorder = new EventRecorder(
        db,
        [
          copies,
          new MessageProjection(clock, copies, held),
          new OutboxProjection({ clock, maxAttempts: 3, copies, held, onCommitted: () => undefined }),
        ],
        pino({ level: 'silent' }),
        dialect === 'postgres' ? { turn: recorderTurns(db) } : {},
      );
      relayed.set(nodeId, []);
      const session = fakeSession(async (message: OutgoingMessage): Promise<SentMessage> => {
        const id = message.id ?? '';
        relayed.get(nodeId)?.push(id);
        await recorder.record(instanceId, ownMessage(id));
        await afterRecord(id);
        return { id, timestamp: clock() };
      });
      const queue = testQueue(
        clock,
        db,
        instanceId,
        session,
        (instance, report) => recordSendStatus(recorder, instance, report),
        { nodeId, recordWith: (instance, write) => recordWithStatus(recorder, instance, write) },
      );
      recorder.use(queue);
      return { recorder, queue };
    }

    /** The job's row as the test reads it. */
    const row = async (id: string) =>
      await testStore.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'locked_by', 'sent_at', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /** The types of the instance's recorded events, in sequence order. */
    const eventTypes = async () =>
      (
        await testStore.store.db
          .selectFrom('webhook_events')
          .select('type')
          .where('instance_id', '=', instanceId)
          .orderBy('sequence')
          .execute()
      ).map((event) => event.type);
    /** The stored message's delivery state. */
    const messageState = async (id: string) =>
      (
        await testStore.store.db
          .selectFrom('messages')
          .select('state')
          .where('id', '=', id)
          .executeTakeFirst()
      )?.state;

    /**
     * Node `node-a` holds a receipt for synchronous job `id` (the recipient read it before its message was recorded),
     * relays the job for a waiting request, records its message and dies before the relay returns: its queue stops.
     * The clock then moves on a second (the restart).
     */
    async function recordsThenDies(id: string): Promise<void> {
      await insertSendJob(testStore.store.db, textJob(instanceId, id, 'sync', clock()));
      let recorded = false;
      const a = node('node-a', async () => {
        recorded = true;
        // The process dies here, after the transaction recording the message committed.
        await new Promise<never>(() => undefined);
      });
      await a.recorder.record(instanceId, readReceipt(id));
      const held = await testStore.store.db
        .selectFrom('held_receipts')
        .select('message_id')
        .where('instance_id', '=', instanceId)
        .execute();
      assert.deepEqual(held, [{ message_id: id }], 'the receipt is held for the job');
      // The request waits on node-a; it dies with it.
      a.queue.waitFor({ instanceId, id }).catch(() => undefined);
      await eventually('node-a recorded the message', () => recorded);
      // It claims nothing more (the stop's wait for its relay, which never returns, is not awaited).
      void a.queue.stop(10);
      now += 1_000;
    }

    it('the next holder ends the job sent, not relayed again, and reports it, then its held receipt', async () => {
      const id = '3EB0RECORDEDTHENCRASH1';
      await recordsThenDies(id);
      const b = node('node-b');
      queues.push(b.queue);
      b.queue.wake(instanceId);
      await eventually('the job ended', async () => (await row(id)).status !== 'sending' || undefined);
      await eventually('the job relayed again, or its outcome recorded', async () => {
        const types = await eventTypes();
        return (relayed.get('node-b')?.length ?? 0) > 0 || types.includes('ReadReceipt');
      });
      await b.queue.stop();
      assert.deepEqual(relayed.get('node-a'), [id]);
      assert.deepEqual(relayed.get('node-b'), [], 'not relayed again: its message was recorded');
      assert.deepEqual(await row(id), {
        status: 'sent',
        attempts: 1,
        locked_by: null,
        // When its message was recorded, before the restart: the time its mark would have written.
        sent_at: T0,
        last_error: null,
      });
      assert.equal(await messageState(id), 'read', 'the held receipt applied to the message');
      assert.deepEqual(
        await eventTypes(),
        dialect === 'postgres'
          ? // The mark rode on the advance and left the job to its relay's finish: the hand-back ends it, reporting
            // its outcome (no request waits on node-b) and then the receipt held for it.
            ['Message', 'MessageStatus', 'ReadReceipt']
          : // The mark was a statement of its own, with the held receipt after the message, and the outcome left to
            // the request that died with node-a.
            ['Message', 'ReadReceipt'],
      );
      assert.deepEqual(
        await testStore.store.db.selectFrom('held_receipts').select('message_id').execute(),
        [],
        'no receipt left held',
      );
    });

    it('a request forwarded again to the next holder is answered sent, with no second relay', async () => {
      const id = '3EB0RECORDEDTHENCRASH2';
      await recordsThenDies(id);
      const b = node('node-b');
      queues.push(b.queue);
      const job = await findSendJob(testStore.store.db, instanceId, id);
      assert.ok(job);
      // What the API does for a forward whose job an earlier forward stored (src/app/messaging.ts `#outcomeOf`).
      const answer = storedOutcome(
        job,
        (waited, signal) => b.queue.waitForStored(waited, signal),
        () => findSendJob(testStore.store.db, instanceId, id),
      );
      b.queue.wake(instanceId);
      assert.deepEqual(await answer, { id, timestamp: T0 });
      await eventually('the job ended', async () => (await row(id)).status !== 'sending' || undefined);
      await b.queue.stop();
      assert.deepEqual(relayed.get('node-b'), [], 'not relayed again');
      assert.equal((await row(id)).status, 'sent');
      const types = await eventTypes();
      assert.deepEqual(types, ['Message', 'ReadReceipt'], 'the request carried the outcome: no status event');
    });

    it('the hand-back ends sent a sending job whose message is stored, whatever its attempts or a logout', async () => {
      const db = testStore.store.db;
      const ids = ['3EB0HANDBACKRECORDED01', '3EB0HANDBACKRECORDED02', '3EB0HANDBACKRECORDED03'];
      const plain = '3EB0HANDBACKNOTRECORD1';
      for (const id of [...ids, plain])
        await insertSendJob(db, { ...textJob(instanceId, id, 'sync', clock()), claimedBy: 'a-dead-node' });
      // The second used its last attempt; the third a logout found being relayed.
      await db
        .updateTable('send_jobs')
        .set({ attempts: 3 })
        .where('id', '=', ids[1] ?? '')
        .execute();
      await db
        .updateTable('send_jobs')
        .set({ logged_out_at: clock() })
        .where('id', '=', ids[2] ?? '')
        .execute();
      const recordedAt = clock() + 500;
      await insertMessages(
        db,
        instanceId,
        ids.map((id) => {
          const event = ownMessage(id);
          if (event.type !== 'message') throw new Error('a message event');
          return { message: event.message, state: 'sent' as const };
        }),
        new Date(recordedAt).toISOString(),
      );
      const reclaimed = await reclaimSendingJobs(db, instanceId, clock() + 1_000);
      assert.deepEqual(reclaimed, {
        handed: 1,
        canceled: [],
        failed: [],
        sent: ids.map((id) => ({ id, at: recordedAt })),
      });
      const rows = await db
        .selectFrom('send_jobs')
        .select(['id', 'status', 'sent_at', 'locked_by', 'payload', 'last_error'])
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        rows.map((r) => ({ ...r, payload: r.payload === '' ? 'dropped' : 'kept' })),
        [
          ...ids.map((id) => ({
            id,
            status: 'sent',
            sent_at: recordedAt,
            locked_by: null,
            payload: 'dropped',
            last_error: null,
          })),
          { id: plain, status: 'pending', sent_at: null, locked_by: null, payload: 'kept', last_error: null },
        ],
      );
    });
  });
}
