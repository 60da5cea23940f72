/**
 * A synchronous send refused by the platform while the store is away, whose request leaves before the store comes
 * back, has its `MessageStatus failed` recorded with the failure once the store takes it: an outcome no answer
 * carried is an event (docs/decisions/0012-session-and-message-status-events.md), and whether a request still waits
 * is asked at each try of the write (docs/decisions/0076-status-with-its-write.md), not once before the store is
 * waited out. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import type { Store } from '../../src/store/database.ts';
import type { NewSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, storeGone, storeWithFaults, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`a request that left while its failure waited for the store [${dialect}]`, () => {
    let t: TestApp;
    let store: Store;
    let queue: SendQueue;
    let down = false;
    let failedWrites = 0;
    let refuse: DomainError | undefined;
    const reports: SendStatusReport[] = [];

    const relayAtOnce = async (id: string, signal?: AbortSignal) => {
      const job: NewSendJob = textJob(t.instance.id, id, 'sync', t.clock());
      t.clock.advance(1);
      const wait = await queue.storeSync(fakeSessionRef, job, signal);
      const stored = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'locked_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      const atOnce = stored.status === 'sending' && Number(stored.locked_at) === job.now;
      return { atOnce, outcome: wait() };
    };
    const fakeSessionRef = fakeSession(async (message) => {
      if (refuse) throw refuse;
      return { id: message.id ?? '', timestamp: t.clock() };
    });

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const faults = (sql: string) => {
        if (
          down &&
          /^update "send_jobs" set "locked_by" = (\?|\$\d+), "locked_at" = (\?|\$\d+), "updated_at" = (\?|\$\d+), "status"/.test(
            sql,
          )
        ) {
          failedWrites += 1;
          throw storeGone();
        }
      };
      store = await storeWithFaults(t, { faults });
      queue = testQueue(t.clock, store.db, t.instance.id, fakeSessionRef, async (_id, report) => {
        reports.push(report);
      });
      queue.wake(t.instance.id);
      let probes = 0;
      await eventually('a synchronous send relayed at once', async () => {
        probes += 1;
        const probe = await relayAtOnce(`3EB0PROBE${String(probes).padStart(13, '0')}`);
        await probe.outcome;
        return probe.atOnce;
      });
      reports.length = 0;
    });
    after(async () => {
      await queue.stop();
      await store.destroy();
      await t.close();
    });

    it('records the failure as an event once stored, its request having left meanwhile', async () => {
      const id = '3EB0LEFTAAAAAAAAAAAAAA';
      refuse = new DomainError('platform_refused', 'the platform rejected the message (error 479)');
      down = true;
      const client = new AbortController();
      const { atOnce, outcome } = await relayAtOnce(id, client.signal);
      assert.ok(atOnce, 'relayed at once');
      const gone = outcome.catch((error: unknown) => error);
      await eventually('the failure written and refused', () => failedWrites >= 1);
      client.abort(new Error('client went away'));
      down = false;
      assert.ok((await gone) instanceof Error, 'the request left without an outcome');
      await eventually('the job failed', async () => {
        const row = await t.services.store.db
          .selectFrom('send_jobs')
          .select('status')
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return row.status === 'failed';
      });
      await eventually('its failure reported', () =>
        reports.some((r) => r.kind === 'message' && r.id === id),
      );
      assert.deepEqual(
        reports
          .filter((r) => r.kind === 'message' && r.id === id)
          .map((r) => r.kind === 'message' && r.status),
        ['failed'],
      );
      refuse = undefined;
    });
  });
}
