import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { sql, type Transaction } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { OutboxProjection } from '../../src/events/outbox-projection.ts';
import { type EventProjection, EventRecorder } from '../../src/events/recorder.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import type { Store } from '../../src/store/database.ts';
import { recorderTurns } from '../../src/store/recorder-turns.ts';
import type { Database } from '../../src/store/schema.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { eventually } from '../support/eventually.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { openProbeStore, urlThrough } from '../support/probe-table.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from '../webhooks/support.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

/**
 * Sent marks riding on the sequence's advance on PostgreSQL (docs/decisions/0087-sent-marks-with-the-advance.md):
 * when a request waits for every relayed job of a recorder batch, the jobs are marked `sent` by the statement that
 * advances the instance's sequence, so the batch costs two round trips (counted through a proxy) instead of three.
 * The real send queue relays each job through a session that records the job's own `message` event, as an engine
 * does; checked against the job rows, the events recorded and the queue's status reports, with a request leaving
 * while its transaction runs, a job another holder had sent already, a transaction rolled back after the advance,
 * and two instances sharing a turn's transaction.
 */

/** An own `message` event of the account with id `id`. */
function ownMessage(id: string): EngineEvent {
  const { message } = textMessage(`sent as ${id}`, { fromMe: true });
  return { type: 'message', message: { ...message, id } };
}

/** A projection that runs `onFlush` (once set) at the end of each batch, after the other projections' flushes. */
class FlushHook implements EventProjection {
  readonly name = 'flush-hook';
  onFlush: ((trx: Transaction<Database>) => void | Promise<void>) | undefined;
  async apply(): Promise<void> {}
  async flush(trx: Transaction<Database>): Promise<void> {
    await this.onFlush?.(trx);
  }
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`sent marks with the sequence's advance [${dialect}]`, () => {
    const url = new URL(process.env.TEST_DATABASE_URL ?? '');
    let proxy: FlightProxy;
    const opened: { store: Store; testStore: TestStore; queue: SendQueue; reader: pg.Client }[] = [];

    before(async () => {
      proxy = await startFlightProxy({ host: url.hostname, port: Number(url.port || 5432) });
    });
    afterEach(async () => {
      for (const { store, testStore, queue, reader } of opened.splice(0)) {
        await queue.stop();
        await reader.end();
        await store.destroy();
        await testStore.cleanup();
      }
    });
    after(async () => {
      await proxy.close();
    });

    /**
     * Two instances (the first with a webhook) in a fresh store reached through the proxy by one connection, a
     * recorder with the message and outbox projections (its batches in the turn's transactions with `inTurns`), the
     * real send queue as its projection, then {@link FlushHook}. The queue relays through a session that records the
     * job's own message (`beforeRecord` run first), counting that record's round trips in `flights`.
     */
    async function setup(inTurns = false) {
      const testStore = await createTestStore('postgres');
      const t = await createWebhookApp({ dialect: 'postgres', testStore });
      await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
      const second = await t.newInstance('test', 'second');
      const instanceId = t.instance.id;
      await t.close();
      if (testStore.database.dialect !== 'postgres') throw new Error('a PostgreSQL test store');
      const reader = new pg.Client({ connectionString: testStore.database.url });
      await reader.connect();
      const { store } = await openProbeStore(urlThrough(new URL(testStore.database.url), proxy), {
        schema: testStore.schema ?? '',
      });
      let now = Date.parse('2026-12-06T08:00:00.000Z');
      const clock = () => now;
      const hook = new FlushHook();
      const recorder = new EventRecorder(
        store.db,
        [
          new MessageProjection(clock),
          new OutboxProjection({ clock, maxAttempts: 3, onCommitted: () => undefined }),
        ],
        pino({ level: 'silent' }),
        inTurns ? { turn: recorderTurns(store.db) } : {},
      );
      const reports: SendStatusReport[] = [];
      const state = {
        flights: 0,
        beforeRecord: undefined as ((id: string) => Promise<void>) | undefined,
      };
      const session = fakeSession(async (message) => {
        const id = message.id ?? '';
        await state.beforeRecord?.(id);
        proxy.reset();
        // An engine whose recording fails once is tried again by the test (`beforeRecord` decides).
        await recorder
          .record(instanceId, ownMessage(id))
          .catch(() => recorder.record(instanceId, ownMessage(id)));
        state.flights = proxy.flights();
        return { id, timestamp: clock() };
      });
      const queue = testQueue(clock, store.db, instanceId, session, async (_instance, report) => {
        reports.push(report);
      });
      recorder.use(queue);
      recorder.use(hook);
      opened.push({ store, testStore, queue, reader });
      // Warms the connection and both instances' routing.
      await recorder.record(instanceId, textMessage('warms the connection'));
      await recorder.record(second.id, textMessage('warms the second'));
      const job = async (id: string, mode: 'sync' | 'async', instance = instanceId) =>
        await insertSendJob(store.db, textJob(instance, id, mode, now));
      const row = async (id: string) =>
        (
          await reader.query<{ status: string; sent_at: string | null; locked_by: string | null }>(
            `select status, sent_at, locked_by from ${testStore.schema}.send_jobs where id = $1`,
            [id],
          )
        ).rows[0];
      /** The types of the events recorded after the two warming ones, in sequence order. */
      const eventTypes = async (instance = instanceId) =>
        (
          await reader.query<{ type: string }>(
            `select type from ${testStore.schema}.webhook_events where instance_id = $1 and sequence > 1
             order by sequence`,
            [instance],
          )
        ).rows.map((r) => r.type);
      return {
        store,
        recorder,
        queue,
        hook,
        reports,
        state,
        instanceId,
        secondId: second.id,
        job,
        row,
        eventTypes,
        advance: (ms: number) => {
          now += ms;
        },
        clock,
      };
    }

    it('marks the jobs of a batch whose requests wait with the advance: two round trips, no status event', async () => {
      const s = await setup();
      const id = '3EB0RIDINGMARK00000001';
      await s.job(id, 'sync');
      const sent = await s.queue.waitFor({ instanceId: s.instanceId, id });
      assert.deepEqual(sent, { id, timestamp: s.clock() });
      assert.equal(
        s.state.flights,
        2,
        'begin with the advance marking the job, then the rows with the commit',
      );
      assert.deepEqual(await s.row(id), { status: 'sent', sent_at: String(s.clock()), locked_by: null });
      assert.deepEqual(await s.eventTypes(), ['Message'], 'the request carried the outcome: no status event');
      assert.deepEqual(s.reports, []);
    });

    it('marks a queued job in a statement of its own, with its status event (three round trips)', async () => {
      const s = await setup();
      const id = '3EB0RIDINGMARK00000002';
      await s.job(id, 'async');
      s.queue.wake(s.instanceId);
      await eventually('the job sent', async () => (await s.row(id))?.status === 'sent');
      // The row commits before the session's record returns and counts its round trips: the relay's end says it did.
      await s.queue.stop();
      assert.equal(s.state.flights, 3, 'begin with the mark, the advance, then the rows with the commit');
      assert.deepEqual(await s.eventTypes(), ['Message', 'MessageStatus']);
      assert.deepEqual(s.reports, []);
    });

    it('records the outcome of a request that left while its transaction ran, once, after the commit', async () => {
      const s = await setup();
      const id = '3EB0RIDINGMARK00000003';
      await s.job(id, 'sync');
      const leave = new AbortController();
      s.hook.onFlush = () => leave.abort(new Error('the client went away'));
      const waited = s.queue.waitFor({ instanceId: s.instanceId, id }, leave.signal);
      await assert.rejects(waited, /the client went away/);
      await eventually('the outcome reported', () => s.reports.length > 0);
      await eventually('the job sent', async () => (await s.row(id))?.status === 'sent');
      assert.equal(
        s.state.flights,
        2,
        'the mark rode on the advance: the request waited when the batch began',
      );
      assert.deepEqual(s.reports, [{ kind: 'message', id, status: 'sent', at: s.clock() }]);
      assert.deepEqual(await s.eventTypes(), ['Message'], 'the report is recorded by the services, not here');
    });

    it('leaves a job another holder sent already as it is, and answers the request', async () => {
      const s = await setup();
      const id = '3EB0RIDINGMARK00000004';
      await s.job(id, 'sync');
      s.state.beforeRecord = async (sentId) => {
        await s.store.db
          .updateTable('send_jobs')
          .set({ status: 'sent', sent_at: 1_000, locked_by: null, locked_at: null })
          .where('id', '=', sentId)
          .execute();
      };
      const sent = await s.queue.waitFor({ instanceId: s.instanceId, id });
      assert.deepEqual(sent, { id, timestamp: s.clock() });
      assert.equal(s.state.flights, 2);
      assert.deepEqual(await s.row(id), { status: 'sent', sent_at: '1000', locked_by: null });
      assert.deepEqual(await s.eventTypes(), ['Message']);
      assert.deepEqual(s.reports, []);
    });

    it('keeps nothing of a mark whose transaction rolled back after the advance, and marks the job in the next', async () => {
      const s = await setup();
      const id = '3EB0RIDINGMARK00000005';
      await s.job(id, 'sync');
      const seen: (string | undefined)[] = [];
      s.hook.onFlush = async () => {
        // At each try's end, after its advance marked the job: the store's committed row, read from outside.
        seen.push((await s.row(id))?.status);
        if (seen.length === 1) throw new Error('a projection failed after the advance');
      };
      const sent = await s.queue.waitFor({ instanceId: s.instanceId, id });
      assert.deepEqual(sent, { id, timestamp: s.clock() });
      assert.deepEqual(seen, ['sending', 'sending'], 'the first try rolled back, its mark with it');
      assert.deepEqual(await s.row(id), { status: 'sent', sent_at: String(s.clock()), locked_by: null });
      assert.deepEqual(
        await s.eventTypes(),
        ['Message'],
        'one message event: the rolled-back one left nothing',
      );
      assert.deepEqual(s.reports, []);
    });

    it('records one status event when a rolled-back try rode on the advance and the request left before the next', async () => {
      const s = await setup();
      const id = '3EB0RIDINGMARK00000008';
      await s.job(id, 'sync');
      const leave = new AbortController();
      let tries = 0;
      s.hook.onFlush = () => {
        tries += 1;
        if (tries > 1) return;
        // The first try's mark rode on the advance (the request waited); the request leaves and the try rolls back.
        leave.abort(new Error('the client went away'));
        throw new Error('a projection failed after the advance');
      };
      const waited = s.queue.waitFor({ instanceId: s.instanceId, id }, leave.signal);
      await assert.rejects(waited, /the client went away/);
      await eventually('the job sent', async () => (await s.row(id))?.status === 'sent');
      await eventually('the second try done', async () => (await s.eventTypes()).length > 0);
      await s.queue.stop();
      assert.equal(tries, 2);
      assert.equal(
        s.state.flights,
        2 + 3,
        'the first try two round trips; the second three: no request waited, so its mark was its own statement',
      );
      assert.deepEqual(
        await s.eventTypes(),
        ['Message', 'MessageStatus'],
        'its status event derived with it',
      );
      assert.deepEqual(s.reports, [], 'and not reported a second time by the relay');
    });

    it("marks two instances' jobs with their shared advance in a turn's transaction: two round trips", async () => {
      const s = await setup(true);
      const first = '3EB0RIDINGMARK00000006';
      const other = '3EB0RIDINGMARK00000007';
      await s.job(first, 'sync');
      await s.job(other, 'sync', s.secondId);
      // Both being relayed by this node, each with a waiting request; the queue stopped, so that nothing of its own
      // (a drain's hand-back of the jobs it does not relay) runs beside the records.
      await s.queue.stop();
      await sql`update send_jobs set status = 'sending', locked_by = 'this-node', locked_at = ${s.clock()}`.execute(
        s.store.db,
      );
      const leave = new AbortController();
      const waits = [
        s.queue.waitFor({ instanceId: s.instanceId, id: first }, leave.signal),
        s.queue.waitFor({ instanceId: s.secondId, id: other }, leave.signal),
      ];
      for (const wait of waits) wait.catch(() => undefined);
      proxy.reset();
      await Promise.all([
        s.recorder.record(s.instanceId, ownMessage(first)),
        s.recorder.record(s.secondId, ownMessage(other)),
      ]);
      assert.equal(
        proxy.flights(),
        2,
        'begin with the shared advance marking both jobs, then the rows and commit',
      );
      for (const id of [first, other])
        assert.deepEqual(await s.row(id), { status: 'sent', sent_at: String(s.clock()), locked_by: null });
      assert.deepEqual(await s.eventTypes(), ['Message']);
      assert.deepEqual(await s.eventTypes(s.secondId), ['Message']);
      leave.abort(new Error('done'));
    });
  });
}
