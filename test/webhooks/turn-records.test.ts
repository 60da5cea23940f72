import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Transaction } from 'kysely';
import type { ClaimedDelivery } from '../../src/store/delivery-claims.ts';
import { type FinishInput, finishAttemptIn } from '../../src/store/delivery-finish.ts';
import { type NextAttempt, nextAttemptOf, startDeliveries } from '../../src/store/delivery-next.ts';
import type { Database } from '../../src/store/schema.ts';
import { TurnTransactions } from '../../src/store/turn-transactions.ts';
import { testDialects } from '../support/store.ts';
import { claimLane, deliveredRecord, laneState, webhookAppPerTest } from './support.ts';

/**
 * Attempt records in the turn's shared transaction (docs/decisions/0051-turn-groups.md): several records in one
 * transaction, each with its own conditions and result; a failing one rolls the shared transaction back, and is
 * then the only one that fails.
 */
for (const dialect of testDialects()) {
  describe(`webhook attempt records in a turn's shared transaction (${dialect})`, () => {
    const app = webhookAppPerTest({ dialect, webhookWorker: { start: false, laneBatch: 4 } });
    const db = () => app.t().testStore.store.db;
    /** Claims the lane's first four deliveries and starts the second too (a lane window of 2). */
    const claimTwoStarted = async () => {
      const { batch, now } = await claimLane(app.t(), dialect, 4);
      const [head, second, third, fourth] = batch;
      assert.ok(head && second && third && fourth, 'four deliveries claimed');
      assert.equal(await startDeliveries(db(), [nextAttemptOf(second)], 'w1', now), 1);
      return { head, second, third, fourth };
    };
    const delivered = (delivery: ClaimedDelivery, next?: NextAttempt): FinishInput =>
      deliveredRecord(delivery, app.t().clock(), next);
    /** The deliveries after the second was delivered and started the third (the head's claim untouched). */
    const secondDelivered = [
      [1, 'pending', 1, 'w1'],
      [2, 'delivered', 1, null],
      [3, 'pending', 1, 'w1'],
      [4, 'pending', 0, 'w1'],
    ];
    const state = () => laneState(db());

    /** Records `inputs` in one turn of `turn`; each result, and the transaction each ran in. */
    const recordInOneTurn = (turn: TurnTransactions, inputs: FinishInput[]) =>
      Promise.allSettled(
        inputs.map((input) =>
          turn.run(async (trx: Transaction<Database>) => ({
            result: await finishAttemptIn(trx, input),
            trx,
          })),
        ),
      );

    it('applies each record with its own conditions in one transaction and gives each its own result', async () => {
      const { head, second, third } = await claimTwoStarted();
      const outcomes = await recordInOneTurn(new TurnTransactions(db()), [
        // The claim of the head as another worker would hold it: not applied, its attempt row still completed.
        { ...delivered(head), lockedAt: head.lockedAt - 1 },
        delivered(second, nextAttemptOf(third)),
      ]);
      const values = outcomes.map((outcome) => {
        assert.equal(outcome.status, 'fulfilled');
        return outcome.status === 'fulfilled' ? outcome.value : undefined;
      });
      assert.equal(values[0]?.trx, values[1]?.trx, 'one transaction');
      assert.deepEqual(
        values.map((value) => value?.result),
        [
          { applied: false, nextStarted: false },
          { applied: true, nextStarted: true },
        ],
      );
      assert.deepEqual(await state(), {
        deliveries: secondDelivered,
        attempts: [
          [1, true],
          [2, true],
          [3, false],
        ],
      });
    });

    it('a record that fails rolls the shared transaction back and then fails alone', async () => {
      const { head, second, third } = await claimTwoStarted();
      const outcomes = await recordInOneTurn(new TurnTransactions(db()), [
        delivered(second, nextAttemptOf(third)),
        { ...delivered(head), now: 'never' },
      ]);
      // Applied again alone after the rollback: had the shared transaction kept it, this second try would find
      // the delivery no longer pending (applied: false).
      assert.ok(outcomes[0]?.status === 'fulfilled');
      assert.deepEqual(outcomes[0].value.result, { applied: true, nextStarted: true });
      assert.ok(outcomes[1]?.status === 'rejected' && outcomes[1].reason instanceof RangeError);
      assert.deepEqual(await state(), {
        deliveries: secondDelivered,
        attempts: [
          [1, false],
          [2, true],
          [3, false],
        ],
      });
    });
  });
}
