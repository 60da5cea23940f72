/**
 * A lane's writes whose PostgreSQL connection really breaks while their commit still runs on the server
 * (docs/decisions/0011-store-faults.md, 0048-lane-batches.md, 0050-lane-windows.md): the client gives up
 * ("Connection terminated") and the server goes on and commits. The write's next try, on another connection, must
 * learn what the first one did: a start taken for "not made" gives the delivery back with its attempt counted and
 * its attempt row open (the next claim logs that attempt abandoned though its request never went out), and a start
 * made a second time fails on the attempt row's key and leaves the window's deliveries unsent until their claim goes
 * stale. A deferred constraint trigger holds the commit for 0.6 s; the test closes the socket as soon as the
 * statement is written. Only PostgreSQL (TEST_DATABASE_URL): an embedded SQLite store has no connection to lose.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { nextAttemptOf, startDeliveries } from '../../src/store/delivery-next.ts';
import { untilStoreAnswers } from '../../src/store/faults.ts';
import { RetryPolicy } from '../../src/webhooks/backoff.ts';
import { LaneRecords, type StartDecision } from '../../src/webhooks/lane-records.ts';
import type { SentAttempt } from '../../src/webhooks/sending.ts';
import type { TestApp } from '../support/app.ts';
import {
  adminSql,
  armHold,
  breakConnections,
  holdCommitFunction,
  holdCommitTrigger,
} from '../support/broken-connections.ts';
import { testDialects } from '../support/store.ts';
import { claimLane, webhookAppPerTest } from './support.ts';

/**
 * Holds for 0.6 s the commit of the first transaction that updates a `webhook_deliveries` row as `when` (a trigger
 * condition on `old` and `new`) says, once armed: a switch the trigger turns off, so a try again is not held.
 * @returns arms the hold.
 */
async function holdFirstCommit(t: TestApp, when: string): Promise<() => Promise<void>> {
  const schema = t.testStore.schema ?? 'public';
  await adminSql(t.testStore, [
    ...holdCommitFunction(schema, false),
    holdCommitTrigger(schema, 'hold_commit', 'update', 'webhook_deliveries', when),
  ]);
  return () => armHold(t.testStore);
}

/**
 * Runs `work` with the connection that writes the first statement whose text matches `statement` closed right
 * after it is written. @returns `work`'s result and how many connections were closed.
 */
async function breakingAfter<T>(
  statement: RegExp,
  work: () => Promise<T>,
): Promise<{ result: T; broken: number }> {
  let broken = 0;
  const restore = breakConnections((text) => {
    if (broken > 0 || !statement.test(text)) return undefined;
    broken += 1;
    return 'after';
  });
  try {
    return { result: await work(), broken };
  } finally {
    restore();
  }
}

const answered: SentAttempt = {
  record: { statusCode: 200, durationMs: 1, error: null, responseBody: 'ok', responseTruncated: false },
  retryAfter: undefined,
  gone: false,
};

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`a lane write whose connection breaks while its commit runs on the server [${dialect}]`, () => {
    const app = webhookAppPerTest({ dialect, webhookWorker: { start: false, laneBatch: 3 } });
    /** Every delivery row in sequence order: [sequence, status, attempts, locked_by]. */
    const rows = async () =>
      (
        await app
          .t()
          .testStore.store.db.selectFrom('webhook_deliveries')
          .select(['sequence', 'status', 'attempts', 'locked_by'])
          .orderBy('sequence')
          .execute()
      ).map((row) => [Number(row.sequence), row.status, row.attempts, row.locked_by]);
    /** Every attempt row: [sequence of its delivery, number, finished?]. */
    const attempts = async () =>
      (
        await app
          .t()
          .testStore.store.db.selectFrom('webhook_attempts as a')
          .innerJoin('webhook_deliveries as d', (join) =>
            join.onRef('d.event_id', '=', 'a.event_id').onRef('d.endpoint_id', '=', 'a.endpoint_id'),
          )
          .select(['d.sequence', 'a.number', 'a.finished_at'])
          .orderBy('d.sequence')
          .orderBy('a.number')
          .execute()
      ).map((row) => [Number(row.sequence), row.number, row.finished_at !== null]);

    it("a delivered record reports the start its first try made: the lane's next delivery stays started, counted once", async () => {
      const t = app.t();
      const { store } = t.testStore;
      const arm = await holdFirstCommit(t, "new.status = 'delivered'");
      const { batch } = await claimLane(t, dialect, 2);
      const [d1, d2] = batch;
      assert.ok(d1 && d2);
      const records = new LaneRecords(
        {
          options: { store, turn: undefined, clock: t.clock, logger: pino({ level: 'silent' }) },
          retry: new RetryPolicy([60_000]),
          workerId: 'w1',
          staleMs: 600_000,
          stopping: () => false,
        },
        Promise.resolve(),
      );
      const own: StartDecision = { started: undefined };
      await arm();
      const { result: started, broken } = await breakingAfter(/^with completed as/, () =>
        records.add({
          delivery: d1,
          sent: answered,
          taken: { next: d2, before: { started: true }, own },
          halted: () => false,
        }),
      );
      assert.equal(broken, 1, 'a connection broke as it committed');
      assert.equal(started, true, 'the start its first try made');
      assert.equal(own.started, true);
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, null],
        [2, 'pending', 1, 'w1'],
      ]);
      assert.deepEqual(await attempts(), [
        [1, 1, true],
        [2, 1, false],
      ]);
    });

    it("a window's opening tried again after its connection broke finds its starts made: each counted once", async () => {
      const t = app.t();
      const { store } = t.testStore;
      const arm = await holdFirstCommit(t, 'new.attempts > old.attempts');
      const { batch, now } = await claimLane(t, dialect, 3);
      const [, d2, d3] = batch;
      assert.ok(d2 && d3);
      await arm();
      // As a lane opens its window (src/webhooks/lane-run.ts): tried again while the store cannot be reached.
      let tries = 0;
      const { result: started, broken } = await breakingAfter(/with input as/, () =>
        untilStoreAnswers(
          () => startDeliveries(store.db, [d2, d3].map(nextAttemptOf), 'w1', now, dialect, tries++ > 0),
          Date.now,
          Date.now() + 10_000,
        ),
      );
      assert.equal(broken, 1, 'a connection broke as it committed');
      assert.equal(started, 2, 'both started');
      assert.deepEqual(await rows(), [
        [1, 'pending', 1, 'w1'],
        [2, 'pending', 1, 'w1'],
        [3, 'pending', 1, 'w1'],
      ]);
      assert.deepEqual(await attempts(), [
        [1, 1, false],
        [2, 1, false],
        [3, 1, false],
      ]);
    });
  });
}
