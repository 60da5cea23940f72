import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { type ClaimedDelivery, claimDeliveries } from '../../src/store/delivery-claims.ts';
import { nextAttemptOf, startDeliveries } from '../../src/store/delivery-next.ts';
import { RetryPolicy } from '../../src/webhooks/backoff.ts';
import { CrossLaneRecords } from '../../src/webhooks/cross-lane-records.ts';
import { type AnsweredAttempt, LaneRecords, type StartDecision } from '../../src/webhooks/lane-records.ts';
import type { SentAttempt } from '../../src/webhooks/sending.ts';
import { testDialects } from '../support/store.ts';
import { createEndpoint } from './endpoint-support.ts';
import { dueNow, faultingStore, lostAnswer, recordMessages, webhookAppPerTest } from './support.ts';

const answered: SentAttempt = {
  record: { statusCode: 200, durationMs: 1, error: null, responseBody: 'ok', responseTruncated: false },
  retryAfter: undefined,
  gone: false,
};

/**
 * Records across lanes on PostgreSQL (docs/decisions/0081-record-statements-across-lanes.md): the delivered records of
 * the lanes answered in one turn are written in one statement, each lane's start order kept within the lane, and a
 * statement whose answer was lost leaves every lane to ask what it made.
 */
describe('webhook records across lanes (postgres)', { skip: !testDialects().includes('postgres') }, () => {
  const app = webhookAppPerTest({ dialect: 'postgres', webhookWorker: { start: false } });

  /**
   * Two lanes of the test instance (its default webhook and an endpoint), each with two deliveries claimed by worker
   * `w1` (the head started), and one lane's records per lane sharing a {@link CrossLaneRecords} on a store whose
   * statements are counted and failed as `fail` says (by the statement's number, from 1).
   */
  const setUp = async (fail: (call: number) => Error | undefined = () => undefined, perLane = 2) => {
    const t = app.t();
    const { store } = t.testStore;
    await createEndpoint(t, { url: 'https://127.0.0.1:9/second', events: ['Message'] });
    await recordMessages(t, perLane);
    const now = t.clock();
    const claimed = await claimDeliveries(store.db, 'postgres', {
      workerId: 'w1',
      now,
      dueAt: dueNow(t),
      staleBefore: t.services.webhooks.staleBefore(now),
      limit: 8,
      perLane,
    });
    assert.equal(claimed.length, 2 * perLane, `${perLane} deliveries of each of the two lanes claimed`);
    const lanes = new Map<string, ClaimedDelivery[]>();
    for (const delivery of claimed)
      lanes.set(delivery.endpointId, [...(lanes.get(delivery.endpointId) ?? []), delivery]);
    /** The SQL text of every statement run through the store, in order. */
    const statements: string[] = [];
    const counted = faultingStore(store.db, fail, (sql) => statements.push(sql));
    const together = new CrossLaneRecords(counted);
    const recordsOfLane = () =>
      new LaneRecords(
        {
          options: {
            store: { ...store, db: counted },
            turn: undefined,
            clock: t.clock,
            logger: pino({ level: 'silent' }),
          },
          retry: new RetryPolicy([60_000]),
          workerId: 'w1',
          staleMs: 600_000,
          stopping: () => false,
          together,
        },
        Promise.resolve(),
      );
    const [defaultLane, endpointLane] = [...lanes.entries()].sort(([a], [b]) => a.localeCompare(b));
    assert.ok(defaultLane && endpointLane);
    assert.equal(defaultLane[0], '', 'the default webhook lane');
    return { lanes: [defaultLane[1], endpointLane[1]], statements, recordsOfLane };
  };

  /** The head's delivered answer of `lane`, taking the lane's second delivery after the window's opening. */
  const headAnswer = (lane: ClaimedDelivery[], halted = false): AnsweredAttempt => {
    const [head, second] = lane;
    assert.ok(head && second);
    const before: StartDecision = { started: true };
    return {
      delivery: head,
      sent: answered,
      taken: { next: second, before, own: { started: undefined } },
      halted: () => halted,
    };
  };

  /** Each delivery's lane, sequence, status, attempts counted and holder, and each attempt's lane, sequence and end. */
  const rows = async () => {
    const { db } = app.t().testStore.store;
    const deliveries = await db
      .selectFrom('webhook_deliveries')
      .select(['endpoint_id', 'sequence', 'status', 'attempts', 'locked_by'])
      .orderBy('endpoint_id')
      .orderBy('sequence')
      .execute();
    const attempts = await db
      .selectFrom('webhook_attempts as a')
      .innerJoin('webhook_deliveries as d', (join) =>
        join.onRef('d.event_id', '=', 'a.event_id').onRef('d.endpoint_id', '=', 'a.endpoint_id'),
      )
      .select(['d.endpoint_id', 'd.sequence', 'a.finished_at'])
      .orderBy('d.endpoint_id')
      .orderBy('d.sequence')
      .execute();
    return {
      deliveries: deliveries.map((d) => [
        d.endpoint_id === '' ? 'default' : 'endpoint',
        Number(d.sequence),
        d.status,
        d.attempts,
        d.locked_by,
      ]),
      attempts: attempts.map((a) => [
        a.endpoint_id === '' ? 'default' : 'endpoint',
        Number(a.sequence),
        a.finished_at !== null,
      ]),
    };
  };

  /** Both lanes' heads delivered and their second deliveries started (counted, an open attempt each). */
  const bothStarted = {
    deliveries: [
      ['default', 1, 'delivered', 1, null],
      ['default', 2, 'pending', 1, 'w1'],
      ['endpoint', 1, 'delivered', 1, null],
      ['endpoint', 2, 'pending', 1, 'w1'],
    ],
    attempts: [
      ['default', 1, true],
      ['default', 2, false],
      ['endpoint', 1, true],
      ['endpoint', 2, false],
    ],
  };

  it("records two lanes' answers of one turn in one statement, each starting its lane's next delivery", async () => {
    const { lanes, statements, recordsOfLane } = await setUp();
    const [first, second] = lanes;
    assert.ok(first && second);
    const answers = [headAnswer(first), headAnswer(second)];
    statements.length = 0;
    const started = await Promise.all([
      recordsOfLane().add(answers[0] as AnsweredAttempt),
      recordsOfLane().add(answers[1] as AnsweredAttempt),
    ]);
    assert.deepEqual(started, [true, true]);
    assert.deepEqual(
      answers.map((answer) => answer.taken?.own.started),
      [true, true],
    );
    assert.equal(statements.length, 1, 'one statement for both lanes');
    assert.match(statements[0] ?? '', /partition by i\.lane/);
    assert.deepEqual(await rows(), bothStarted);
  });

  it("keeps each lane's start order to itself: a lane that may not start leaves the other lane's start alone", async () => {
    const { lanes, statements, recordsOfLane } = await setUp();
    const [first, second] = lanes;
    assert.ok(first && second);
    // The first lane's batch halted (another attempt of its window failed): its record takes its next delivery but
    // may not start it, which ends that lane's starts; written first in the statement, it must not end the second's.
    const answers = [headAnswer(first, true), headAnswer(second)];
    statements.length = 0;
    const started = await Promise.all([
      recordsOfLane().add(answers[0] as AnsweredAttempt),
      recordsOfLane().add(answers[1] as AnsweredAttempt),
    ]);
    assert.deepEqual(started, [false, true]);
    assert.equal(statements.length, 1, 'one statement for both lanes');
    assert.deepEqual((await rows()).deliveries, [
      ['default', 1, 'delivered', 1, null],
      ['default', 2, 'pending', 0, 'w1'],
      ['endpoint', 1, 'delivered', 1, null],
      ['endpoint', 2, 'pending', 1, 'w1'],
    ]);
  });

  it("writes one lane's single record alone in its turn by the single-record statement", async () => {
    const { lanes, statements, recordsOfLane } = await setUp();
    const [first] = lanes;
    assert.ok(first);
    statements.length = 0;
    assert.equal(await recordsOfLane().add(headAnswer(first)), true);
    assert.equal(statements.length, 1);
    assert.match(statements[0] ?? '', /^with completed as \(/);
    assert.doesNotMatch(statements[0] ?? '', /partition by/);
    assert.deepEqual((await rows()).deliveries.slice(0, 2), [
      ['default', 1, 'delivered', 1, null],
      ['default', 2, 'pending', 1, 'w1'],
    ]);
  });

  it('a statement whose answer was lost: each lane asks, reports the starts it made, and nothing is written twice', async () => {
    // Each lane has a window of two open (its first two deliveries started) and both answers in: a group of two
    // records per lane, each taking the lane's next delivery. The statement for both lanes commits; its answer is
    // lost (the connection reset as it answered).
    const { lanes, statements, recordsOfLane } = await setUp(
      (call) => (call === 1 ? lostAnswer() : undefined),
      4,
    );
    const { db } = app.t().testStore.store;
    const answers: AnsweredAttempt[][] = [];
    for (const lane of lanes) {
      const [d1, d2, d3, d4] = lane;
      assert.ok(d1 && d2 && d3 && d4);
      assert.equal(await startDeliveries(db, [nextAttemptOf(d2)], 'w1', d2.lockedAt), 1);
      const first: StartDecision = { started: undefined };
      answers.push([
        {
          delivery: d1,
          sent: answered,
          taken: { next: d3, before: { started: true }, own: first },
          halted: () => false,
        },
        {
          delivery: d2,
          sent: answered,
          taken: { next: d4, before: first, own: { started: undefined } },
          halted: () => false,
        },
      ]);
    }
    statements.length = 0;
    const started = await Promise.all(
      answers.map((lane) => {
        const records = recordsOfLane();
        return Promise.all(lane.map((answer) => records.add(answer)));
      }),
    );
    assert.deepEqual(
      started,
      [
        [true, true],
        [true, true],
      ],
      'the starts the lost statement made are reported',
    );
    assert.match(statements[0] ?? '', /partition by i\.lane/);
    assert.ok(statements.length > 1, 'each lane asked again after the lost answer');
    const lane = (name: string) => [
      [name, 1, 'delivered', 1, null],
      [name, 2, 'delivered', 1, null],
      [name, 3, 'pending', 1, 'w1'],
      [name, 4, 'pending', 1, 'w1'],
    ];
    const attempts = (name: string) => [
      [name, 1, true],
      [name, 2, true],
      [name, 3, false],
      [name, 4, false],
    ];
    assert.deepEqual(
      await rows(),
      {
        deliveries: [...lane('default'), ...lane('endpoint')],
        attempts: [...attempts('default'), ...attempts('endpoint')],
      },
      'one attempt row each, no start twice',
    );
  });

  it('a statement the store refused is written again one lane at a time, and each lane still starts', async () => {
    // The store answers the statement for both lanes with an error of its own (nothing of it kept).
    const { lanes, statements, recordsOfLane } = await setUp((call) =>
      call === 1 ? Object.assign(new Error('deadlock detected'), { code: '40P01' }) : undefined,
    );
    const [first, second] = lanes;
    assert.ok(first && second);
    statements.length = 0;
    const started = await Promise.all([
      recordsOfLane().add(headAnswer(first)),
      recordsOfLane().add(headAnswer(second)),
    ]);
    assert.deepEqual(started, [true, true]);
    assert.deepEqual(
      statements.map((text) =>
        /partition by/.test(text) ? 'together' : /^with completed as/.test(text) ? 'alone' : text,
      ),
      ['together', 'alone', 'alone'],
    );
    assert.deepEqual(await rows(), bothStarted);
  });
});
