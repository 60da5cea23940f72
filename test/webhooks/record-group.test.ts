import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimDeliveries } from '../../src/store/delivery-claims.ts';
import { type FinishInput, finishAttemptsTogether } from '../../src/store/delivery-finish.ts';
import { type NextAttempt, nextAttemptOf, startDeliveries } from '../../src/store/delivery-next.ts';
import { RecordGroup } from '../../src/webhooks/record-group.ts';
import { testDialects } from '../support/store.ts';
import { recordMessages, webhookAppPerTest } from './support.ts';

/**
 * Attempt records written together (docs/decisions/0051-turn-groups.md): several records in one transaction, each
 * with its own conditions and result, and the worker's group of a turn's records, where one bad record fails alone.
 */
for (const dialect of testDialects()) {
  describe(`webhook attempt records written together (${dialect})`, () => {
    const app = webhookAppPerTest({ dialect, webhookWorker: { start: false, laneBatch: 4 } });
    const db = () => app.t().testStore.store.db;
    /** Claims the lane's first four deliveries and starts the second too (a lane window of 2). */
    const claimTwoStarted = async () => {
      await recordMessages(app.t(), 4);
      const now = app.t().clock();
      const batch = await claimDeliveries(db(), dialect, {
        workerId: 'w1',
        now,
        staleBefore: app.t().services.webhooks.staleBefore(now),
        limit: 8,
        perLane: 4,
      });
      const [head, second, third, fourth] = batch;
      assert.ok(head && second && third && fourth, 'four deliveries claimed');
      assert.equal(await startDeliveries(db(), [nextAttemptOf(second)], 'w1', now), 1);
      return { head, second, third, fourth };
    };
    const delivered = (
      delivery: {
        eventId: string;
        endpointId: string;
        instanceId: string;
        attemptId: string;
        lockedAt: number;
      },
      next?: NextAttempt,
    ): FinishInput => ({
      eventId: delivery.eventId,
      endpointId: delivery.endpointId,
      instanceId: delivery.instanceId,
      attemptId: delivery.attemptId,
      workerId: 'w1',
      lockedAt: delivery.lockedAt,
      attempt: { statusCode: 200, durationMs: 4, error: null, responseBody: 'ok', responseTruncated: false },
      outcome: { kind: 'delivered' },
      now: new Date(app.t().clock()).toISOString(),
      ...(next === undefined ? {} : { next }),
    });
    /** [sequence, status, attempts, locked_by] per delivery, and [sequence, finished?] per attempt row. */
    const state = async () => ({
      deliveries: (
        await db()
          .selectFrom('webhook_deliveries')
          .select(['sequence', 'status', 'attempts', 'locked_by'])
          .orderBy('sequence')
          .execute()
      ).map((row) => [Number(row.sequence), row.status, row.attempts, row.locked_by]),
      attempts: (
        await db()
          .selectFrom('webhook_attempts as a')
          .innerJoin('webhook_deliveries as d', (join) =>
            join.onRef('d.event_id', '=', 'a.event_id').onRef('d.endpoint_id', '=', 'a.endpoint_id'),
          )
          .select(['d.sequence', 'a.finished_at'])
          .orderBy('d.sequence')
          .execute()
      ).map((row) => [Number(row.sequence), row.finished_at !== null]),
    });

    it('applies each record with its own conditions and gives each its own result', async () => {
      const { head, second, third } = await claimTwoStarted();
      const results = await finishAttemptsTogether(db(), [
        // The claim of the head as another worker would hold it: not applied, its attempt row still completed.
        { ...delivered(head), lockedAt: head.lockedAt - 1 },
        delivered(second, nextAttemptOf(third)),
      ]);
      assert.deepEqual(results, [
        { applied: false, nextStarted: false },
        { applied: true, nextStarted: true },
      ]);
      assert.deepEqual(await state(), {
        deliveries: [
          [1, 'pending', 1, 'w1'],
          [2, 'delivered', 1, null],
          [3, 'pending', 1, 'w1'],
          [4, 'pending', 0, 'w1'],
        ],
        attempts: [
          [1, true],
          [2, true],
          [3, false],
        ],
      });
    });

    it('a record that fails rolls the whole group back', async () => {
      const { head, second, third } = await claimTwoStarted();
      const before = await state();
      await assert.rejects(
        finishAttemptsTogether(db(), [
          delivered(head),
          { ...delivered(second, nextAttemptOf(third)), now: 'never' },
        ]),
        RangeError,
      );
      assert.deepEqual(await state(), before);
    });

    it("the worker's group of one turn: each caller gets its own result, and a bad record fails alone", async () => {
      const { head, second, third } = await claimTwoStarted();
      const group = new RecordGroup(app.t().testStore.store);
      const outcomes = await Promise.allSettled([
        group.record({ ...delivered(head), now: 'never' }),
        group.record(delivered(second, nextAttemptOf(third))),
      ]);
      assert.equal(outcomes[0]?.status, 'rejected');
      assert.ok(outcomes[0]?.status === 'rejected' && outcomes[0].reason instanceof RangeError);
      assert.deepEqual(outcomes[1], { status: 'fulfilled', value: { applied: true, nextStarted: true } });
      assert.deepEqual(await state(), {
        deliveries: [
          [1, 'pending', 1, 'w1'],
          [2, 'delivered', 1, null],
          [3, 'pending', 1, 'w1'],
          [4, 'pending', 0, 'w1'],
        ],
        attempts: [
          [1, false],
          [2, true],
          [3, false],
        ],
      });
    });
  });
}
