/**
 * A worker's record that comes after its claim was taken over
 * (docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md): a worker claims a delivery and stalls past the stale
 * timeout, another claim takes the delivery over and marks the stalled worker's open attempt abandoned, then the
 * stalled worker's record arrives. Before, the record completed the
 * abandoned attempt with its own result, so the log showed a result for an attempt it had said was abandoned. Each
 * form of the record is tried: the transaction form (both stores), the delivered record's one statement and the
 * group statement (PostgreSQL). Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { ABANDONED, type ClaimedDelivery, claimDeliveries } from '../../src/store/delivery-claims.ts';
import {
  type AttemptOutcome,
  type FinishInput,
  type FinishResult,
  finishAndStartNext,
  finishAttempt,
} from '../../src/store/delivery-finish.ts';
import { deliveredGroupInOneStatement } from '../../src/store/delivery-group.ts';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, dueNow, recordMessages } from './support.ts';

/** The stale timeout of the test app's worker and a millisecond: a claim that old is taken over. */
const STALE_MS = 2 * 5_000 + 30_000 + 1;

for (const dialect of testDialects()) {
  describe(`a late record after a takeover (${dialect})`, () => {
    let receiver: Receiver;
    let t: TestApp;
    beforeEach(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({ dialect, webhookWorker: { start: false, laneBatch: 1 } });
      await configureWebhook(t, receiver.url);
    });
    afterEach(async () => {
      await t.close();
      await receiver.close();
    });
    const db = () => t.testStore.store.db;

    /** One claim of `workerId` on the store's clock at `lockedAt`, taking over claims older than the stale timeout. */
    const claim = async (workerId: string, lockedAt: number): Promise<ClaimedDelivery> => {
      const [claimed, ...rest] = await claimDeliveries(db(), dialect, {
        workerId,
        now: t.clock(),
        dueAt: dueNow(t),
        lockedAt,
        staleBefore: lockedAt - STALE_MS + 1,
        limit: 1,
      });
      assert.ok(claimed, `${workerId} claimed nothing`);
      assert.equal(rest.length, 0);
      return claimed;
    };

    /**
     * Records event 1, lets `stalled` claim it, and another worker take the claim over once it is stale (marking the
     * stalled attempt abandoned). @returns the stalled claim and the takeover's time (epoch ms, the attempt's end).
     */
    const takenOver = async (): Promise<{ stalled: ClaimedDelivery; takeoverAt: number }> => {
      await recordMessages(t, 1);
      const stalled = await claim('stalled', t.services.storeClock.now());
      t.clock.advance(STALE_MS);
      const takeoverAt = t.clock();
      const takeover = await claim('takeover', stalled.lockedAt + STALE_MS);
      assert.equal(takeover.eventId, stalled.eventId);
      assert.equal(takeover.attemptNumber, 2);
      return { stalled, takeoverAt };
    };

    /** The stalled worker's record of a 200 (or of `outcome`), arriving after the takeover. */
    const lateInput = (stalled: ClaimedDelivery, outcome: AttemptOutcome): FinishInput => {
      t.clock.advance(1_000);
      return {
        eventId: stalled.eventId,
        endpointId: stalled.endpointId,
        instanceId: stalled.instanceId,
        attemptId: stalled.attemptId,
        workerId: 'stalled',
        lockedAt: stalled.lockedAt,
        attempt: {
          statusCode: outcome.kind === 'delivered' ? 200 : 500,
          durationMs: STALE_MS + 1_000,
          error: outcome.kind === 'delivered' ? null : 'receiver answered 500',
          responseBody: 'late',
          responseTruncated: false,
        },
        outcome,
        now: new Date(t.clock()).toISOString(),
      };
    };

    /** The abandoned attempt is left as the takeover marked it, and the delivery as the takeover's claim holds it. */
    const assertUnchanged = async (stalled: ClaimedDelivery, takeoverAt: number, result: FinishResult) => {
      assert.deepEqual(result, { applied: false, nextStarted: false });
      const attempts = await db()
        .selectFrom('webhook_attempts')
        .select(['number', 'worker', 'finished_at', 'status_code', 'duration_ms', 'error', 'response_body'])
        .where('event_id', '=', stalled.eventId)
        .orderBy('number')
        .execute();
      assert.deepEqual(
        attempts.map((a) => ({ ...a, finished_at: a.finished_at === null ? null : Number(a.finished_at) })),
        [
          {
            number: 1,
            worker: 'stalled',
            finished_at: takeoverAt,
            status_code: null,
            duration_ms: null,
            error: ABANDONED,
            response_body: null,
          },
          {
            number: 2,
            worker: 'takeover',
            finished_at: null,
            status_code: null,
            duration_ms: null,
            error: null,
            response_body: null,
          },
        ],
      );
      const delivery = await db()
        .selectFrom('webhook_deliveries')
        .select(['status', 'locked_by', 'attempts', 'last_status', 'last_error', 'delivered_at'])
        .where('event_id', '=', stalled.eventId)
        .executeTakeFirstOrThrow();
      assert.deepEqual(delivery, {
        status: 'pending',
        locked_by: 'takeover',
        attempts: 2,
        last_status: null,
        last_error: null,
        delivered_at: null,
      });
    };

    it('a late failed record (the transaction form) leaves the abandoned attempt and the takeover alone', async () => {
      const { stalled, takeoverAt } = await takenOver();
      const input = lateInput(stalled, { kind: 'retry', runAt: t.clock() + 5_000 });
      const applied = await finishAttempt(db(), input);
      await assertUnchanged(stalled, takeoverAt, { applied, nextStarted: false });
    });

    it('a late delivered record leaves the abandoned attempt and the takeover alone', async () => {
      const { stalled, takeoverAt } = await takenOver();
      const result = await finishAndStartNext(db(), lateInput(stalled, { kind: 'delivered' }), dialect);
      await assertUnchanged(stalled, takeoverAt, result);
    });

    if (dialect === 'postgres') {
      it('a late delivered record in a group statement leaves the abandoned attempt and the takeover alone', async () => {
        const { stalled, takeoverAt } = await takenOver();
        const [result] = await deliveredGroupInOneStatement(db(), [
          { input: lateInput(stalled, { kind: 'delivered' }), takes: false },
        ]);
        assert.ok(result);
        await assertUnchanged(stalled, takeoverAt, result);
      });
    }
  });
}
