import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { ClaimedDelivery } from '../../src/store/delivery-claims.ts';
import { nextAttemptOf, startDeliveries } from '../../src/store/delivery-next.ts';
import { type TransactionWork, TurnTransactions } from '../../src/store/turn-transactions.ts';
import { RetryPolicy } from '../../src/webhooks/backoff.ts';
import { type AnsweredAttempt, LaneRecords, type StartDecision } from '../../src/webhooks/lane-records.ts';
import type { SentAttempt } from '../../src/webhooks/sending.ts';
import { testDialects } from '../support/store.ts';
import { claimLane, faultingStore, laneState, lostAnswer, webhookAppPerTest } from './support.ts';

/** A turn's shared transaction that counts the parts written in it. */
class CountingTurn extends TurnTransactions {
  parts = 0;
  override run<R>(work: TransactionWork<R>, weight?: number): Promise<R> {
    this.parts += 1;
    return super.run(work, weight);
  }
}

const answered: SentAttempt = {
  record: { statusCode: 200, durationMs: 1, error: null, responseBody: 'ok', responseTruncated: false },
  retryAfter: undefined,
  gone: false,
};

/** Delivered answers for `answers`, taking the deliveries in `taken`, chained after `opening`, as a lane takes them. */
function chain(
  answers: ClaimedDelivery[],
  taken: ClaimedDelivery[],
  opening: StartDecision,
): AnsweredAttempt[] {
  let before = opening;
  return answers.map((delivery, index) => {
    const next = taken[index];
    if (next === undefined) return { delivery, sent: answered, taken: undefined, halted: () => false };
    const own: StartDecision = { started: undefined };
    const answer = { delivery, sent: answered, taken: { next, before, own }, halted: () => false };
    before = own;
    return answer;
  });
}

/**
 * Lane record groups (docs/decisions/0059-lane-record-groups.md): the answers of one lane that come in together are
 * recorded together, in the order they came, each starting the delivery it took only when the start before it was
 * made; on SQLite the group is one part of the turn's shared transaction.
 */
for (const dialect of testDialects()) {
  describe(`webhook lane record groups (${dialect})`, () => {
    const app = webhookAppPerTest({ dialect, webhookWorker: { start: false, laneBatch: 6 } });
    const db = () => app.t().testStore.store.db;
    /** Claims the lane's six deliveries as worker `w1` and opens a window of three (the first three started). */
    const openWindowOfThree = async () => {
      const { batch, now } = await claimLane(app.t(), dialect, 6);
      const [, second, third] = batch;
      assert.ok(second && third);
      assert.equal(await startDeliveries(db(), [nextAttemptOf(second), nextAttemptOf(third)], 'w1', now), 2);
      return batch;
    };
    /** Records of the lane of worker `w1`, on this store's shared transaction (SQLite) or one by one. */
    const laneRecords = () => {
      const { store } = app.t().testStore;
      const turn = store.dialect === 'sqlite' ? new CountingTurn(store.db) : undefined;
      const records = new LaneRecords(
        {
          options: { store, turn, clock: app.t().clock, logger: pino({ level: 'silent' }) },
          retry: new RetryPolicy([60_000]),
          workerId: 'w1',
          staleMs: 600_000,
          stopping: () => false,
        },
        Promise.resolve(),
      );
      return { records, turn };
    };
    const state = () => laneState(db());

    it('records answers that came together in one part, each starting the delivery it took, in order', async () => {
      const [d1, d2, d3, d4, d5, d6] = await openWindowOfThree();
      assert.ok(d1 && d2 && d3 && d4 && d5 && d6);
      const { records, turn } = laneRecords();
      const answers = chain([d1, d2, d3], [d4, d5, d6], { started: true });
      const started = await Promise.all(answers.map((answer) => records.add(answer)));
      assert.deepEqual(started, [true, true, true]);
      assert.deepEqual(
        answers.map((answer) => answer.taken?.own.started),
        [true, true, true],
        'each decision set for the delivery taken after it',
      );
      if (turn !== undefined) assert.equal(turn.parts, 1, 'one part of the turn for the three records');
      assert.deepEqual(await state(), {
        deliveries: [
          [1, 'delivered', 1, null],
          [2, 'delivered', 1, null],
          [3, 'delivered', 1, null],
          [4, 'pending', 1, 'w1'],
          [5, 'pending', 1, 'w1'],
          [6, 'pending', 1, 'w1'],
        ],
        attempts: [
          [1, true],
          [2, true],
          [3, true],
          [4, false],
          [5, false],
          [6, false],
        ],
      });
    });

    it('a refused start in a group starts nothing after it, though the later answers were delivered', async () => {
      const [d1, d2, d3, d4, d5, d6] = await openWindowOfThree();
      assert.ok(d1 && d2 && d3 && d4 && d5 && d6);
      const { records } = laneRecords();
      // The first answer's claim as another worker would hold it: its outcome is only logged and its start refused.
      const answers = chain([{ ...d1, lockedAt: d1.lockedAt - 1 }, d2, d3], [d4, d5, d6], { started: true });
      const started = await Promise.all(answers.map((answer) => records.add(answer)));
      assert.deepEqual(started, [false, false, false]);
      assert.deepEqual(
        answers.map((answer) => answer.taken?.own.started),
        [false, false, false],
      );
      assert.deepEqual(await state(), {
        deliveries: [
          [1, 'pending', 1, 'w1'],
          [2, 'delivered', 1, null],
          [3, 'delivered', 1, null],
          [4, 'pending', 0, 'w1'],
          [5, 'pending', 0, 'w1'],
          [6, 'pending', 0, 'w1'],
        ],
        attempts: [
          [1, true],
          [2, true],
          [3, true],
        ],
      });
    });

    it('starts nothing when the start before the group was not made', async () => {
      const [d1, d2, d3, d4, d5, d6] = await openWindowOfThree();
      assert.ok(d1 && d2 && d3 && d4 && d5 && d6);
      const { records } = laneRecords();
      // The opening's last start failed: the first record reads it from outside the group, the others in it.
      const first = chain([d1], [d4], { started: false });
      const [firstAnswer] = first;
      assert.ok(firstAnswer?.taken);
      const second = chain([d2, d3], [d5, d6], firstAnswer.taken.own);
      const started = await Promise.all([...first, ...second].map((answer) => records.add(answer)));
      assert.deepEqual(started, [false, false, false]);
      assert.deepEqual((await state()).deliveries, [
        [1, 'delivered', 1, null],
        [2, 'delivered', 1, null],
        [3, 'delivered', 1, null],
        [4, 'pending', 0, 'w1'],
        [5, 'pending', 0, 'w1'],
        [6, 'pending', 0, 'w1'],
      ]);
    });
  });
}

/**
 * Lane record groups on PostgreSQL's pool when the store fails under them: a record whose answer was lost asks on its
 * next try whether it started its delivery, and a record that cannot be written fails alone.
 */
describe('webhook lane record groups under store faults (postgres)', {
  skip: !testDialects().includes('postgres'),
}, () => {
  const app = webhookAppPerTest({ dialect: 'postgres', webhookWorker: { start: false, laneBatch: 6 } });
  /** Six deliveries claimed by `w1` with a window of three open, and a lane's records on a store failing as told. */
  const setUp = async (
    fail: (call: number) => Error | undefined,
    staleMs = 600_000,
    clock: () => number = app.t().clock,
  ) => {
    const { store } = app.t().testStore;
    const { batch, now } = await claimLane(app.t(), 'postgres', 6);
    const [, second, third] = batch;
    assert.ok(second && third);
    assert.equal(
      await startDeliveries(store.db, [nextAttemptOf(second), nextAttemptOf(third)], 'w1', now),
      2,
    );
    /** The parameters of every statement tried, in order. */
    const statements: (readonly unknown[])[] = [];
    const failing = faultingStore(store.db, fail, (_sql, parameters) => statements.push(parameters));
    let halted = false;
    const records = new LaneRecords(
      {
        options: {
          store: { ...store, db: failing },
          turn: undefined,
          clock,
          logger: pino({ level: 'silent' }),
        },
        retry: new RetryPolicy([60_000]),
        workerId: 'w1',
        staleMs,
        stopping: () => false,
      },
      Promise.resolve(),
    );
    return { batch, records, statements, halt: () => (halted = true), halted: () => halted };
  };
  const lost = lostAnswer;

  it('a record whose first try started its delivery but lost the answer reports the start, though the lane halted', async () => {
    // The first statement commits and its answer is lost; meanwhile another attempt of the window failed.
    let halt: () => void = () => undefined;
    const { batch, records, halted, ...rest } = await setUp((call) => {
      if (call !== 1) return undefined;
      halt();
      return lost();
    });
    halt = rest.halt;
    const [d1, , , d4] = batch;
    assert.ok(d1 && d4);
    const own: StartDecision = { started: undefined };
    const started = await records.add({
      delivery: d1,
      sent: answered,
      taken: { next: d4, before: { started: true }, own },
      halted,
    });
    assert.equal(started, true, 'the start its first try made');
    assert.equal(own.started, true);
    const row = await app
      .t()
      .testStore.store.db.selectFrom('webhook_deliveries')
      .select(['attempts', 'locked_by'])
      .where('event_id', '=', d4.eventId)
      .executeTakeFirst();
    assert.deepEqual(row, { attempts: 1, locked_by: 'w1' }, 'counted once, still claimed to be sent');
  });

  it('after a group statement whose answer was lost, nothing is reported started behind a record that failed', async () => {
    const deadlock = Object.assign(new Error('deadlock detected'), { code: '40P01' });
    // The group's statement commits every start and its answer is lost; the first record's own try then fails.
    const { batch, records } = await setUp((call) =>
      call === 1 ? lost() : call === 2 ? deadlock : undefined,
    );
    const [d1, d2, d3, d4, d5, d6] = batch;
    assert.ok(d1 && d2 && d3 && d4 && d5 && d6);
    const answers = chain([d1, d2, d3], [d4, d5, d6], { started: true });
    const outcomes = await Promise.allSettled(answers.map((answer) => records.add(answer)));
    assert.deepEqual(
      outcomes.map((outcome) => outcome.status),
      ['rejected', 'fulfilled', 'fulfilled'],
    );
    assert.deepEqual(
      outcomes.slice(1).map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : undefined)),
      [false, false],
      'the later deliveries are given back with the first, none reported started',
    );
    assert.deepEqual(
      answers.map((answer) => answer.taken?.own.started),
      [false, false, false],
    );
  });

  it('a group waits out an unreachable store once: the records after the one that gave up fail untried', async () => {
    // Never reachable; half the stale timeout (100 ms, of real time) is what the group waits.
    const { batch, records, statements } = await setUp(() => lost(), 200, Date.now);
    const [d1, d2, d3] = batch;
    assert.ok(d1 && d2 && d3);
    const outcomes = await Promise.allSettled(
      [d1, d2, d3].map((delivery) =>
        records.add({ delivery, sent: answered, taken: undefined, halted: () => false }),
      ),
    );
    assert.deepEqual(
      outcomes.map((outcome) => outcome.status),
      ['rejected', 'rejected', 'rejected'],
    );
    // The group's statement names every record; after it, only the first record's tries.
    const [group, ...tries] = statements;
    assert.ok(group?.some((value) => Array.isArray(value) && value.includes(d2.eventId)));
    assert.ok(tries.length >= 1);
    for (const parameters of tries) {
      assert.ok(parameters.includes(d1.eventId), 'a try of the first record');
      assert.ok(!parameters.includes(d2.eventId) && !parameters.includes(d3.eventId), 'no try of the others');
    }
  });

  it('a record that cannot be written fails alone: the next one of its group is written', async () => {
    const deadlock = () => Object.assign(new Error('deadlock detected'), { code: '40P01' });
    // The group's statement and the first record's own statement fail; the second record's succeeds.
    const { batch, records } = await setUp((call) => (call <= 2 ? deadlock() : undefined));
    const [d1, d2] = batch;
    assert.ok(d1 && d2);
    const outcomes = await Promise.allSettled([
      records.add({ delivery: d1, sent: answered, taken: undefined, halted: () => false }),
      records.add({ delivery: d2, sent: answered, taken: undefined, halted: () => false }),
    ]);
    assert.equal(outcomes[0]?.status, 'rejected');
    assert.deepEqual(outcomes[1], { status: 'fulfilled', value: false });
    const rows = await app
      .t()
      .testStore.store.db.selectFrom('webhook_deliveries')
      .select(['sequence', 'status'])
      .orderBy('sequence')
      .limit(2)
      .execute();
    assert.deepEqual(
      rows.map((row) => [Number(row.sequence), row.status]),
      [
        [1, 'pending'],
        [2, 'delivered'],
      ],
    );
  });
});
