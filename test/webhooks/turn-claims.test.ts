import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../src/store/schema.ts';
import { type TransactionWork, TurnTransactions } from '../../src/store/turn-transactions.ts';
import { DeliveryWorker } from '../../src/webhooks/worker.ts';
import type { TestApp } from '../support/app.ts';
import { assertSigned, bodies, recordMessages, webhookAppPerTest } from './support.ts';

/**
 * The turn's shared transaction, noting each part's weight and the transaction it ran in; `onPart` is called as each
 * part is added.
 */
class WatchedTurn extends TurnTransactions {
  readonly parts: { weight: number; trx: Transaction<Database>[] }[] = [];
  onPart: (weight: number) => void = () => undefined;
  override run<R>(work: TransactionWork<R>, weight = 1): Promise<R> {
    const part = { weight, trx: [] as Transaction<Database>[] };
    this.parts.push(part);
    this.onPart(weight);
    return super.run((trx) => {
      part.trx.push(trx);
      return work(trx);
    }, weight);
  }
}

/**
 * A worker of its own over the test app's store and guard, writing through `turn`, up to `laneBatch` deliveries per
 * lane batch; it claims in `runOnce`, or once started when woken (its poll is a minute).
 */
function workerOver(t: TestApp, turn: TurnTransactions, laneBatch = 32): DeliveryWorker {
  const { store, box, guard, clock, storeClock, logger } = t.services;
  return new DeliveryWorker({
    store,
    box,
    guard,
    clock,
    // Claims and due times on the node's store clock, as the services build their worker.
    storeClock: () => storeClock.now(),
    logger,
    scheduleMs: [1000, 2000],
    timeoutMs: 5000,
    concurrency: 4,
    laneBatch,
    // One request of a lane at a time: each attempt's record is a part of its own.
    laneWindow: 1,
    pollIntervalMs: 60_000,
    turn,
    workerId: 'turn-claims',
  });
}

/** [sequence, status, locked_by] of every delivery, in sequence order. */
async function deliveryRows(db: Kysely<Database>) {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .select(['sequence', 'status', 'locked_by'])
    .orderBy('sequence')
    .execute();
  return rows.map((row) => [Number(row.sequence), row.status, row.locked_by]);
}

/**
 * The delivery worker's claim as a part of the turn's shared transaction on SQLite
 * (docs/decisions/0051-turn-groups.md): it weighs the lanes it may start, runs in the same transaction as the
 * turn's other parts, and its deliveries are sent only once that transaction committed.
 */
describe("webhook claims in a turn's shared transaction (sqlite)", () => {
  const app = webhookAppPerTest({ dialect: 'sqlite', webhookWorker: { start: false } });

  it('claims in the turn with the other parts, then sends and records every claimed delivery', async () => {
    const t = app.t();
    await recordMessages(t, 3);
    const turn = new WatchedTurn(t.testStore.store.db);
    const worker = workerOver(t, turn);
    // A part added in the same turn as the claim: both run in one transaction.
    const other = turn.run(async (trx) => trx);
    const attempted = worker.runOnce();
    assert.equal(await attempted, 3);
    const [first, claim, ...records] = turn.parts;
    assert.equal(claim?.weight, 4, 'the claim weighs the lanes it may start');
    assert.equal(claim?.trx.length, 1);
    assert.equal(claim?.trx[0], await other, 'the claim shares the turn transaction');
    assert.equal(first?.weight, 1);
    assert.deepEqual(
      records.map((part) => part.weight),
      [1, 1, 1],
      'one record per attempt',
    );
    const received = app.receiver().requests;
    assert.deepEqual(
      bodies(received).map((body) => body.sequence),
      [1, 2, 3],
    );
    for (const request of received) assertSigned(request);
    assert.deepEqual(await deliveryRows(t.testStore.store.db), [
      [1, 'delivered', null],
      [2, 'delivered', null],
      [3, 'delivered', null],
    ]);
  });

  it('a lane claimed again in the transaction of its last record is the new batch’s, and stop waits for it', async () => {
    const t = app.t();
    await recordMessages(t, 2);
    const turn = new WatchedTurn(t.testStore.store.db);
    const worker = workerOver(t, turn, 1);
    // The first record's part wakes the worker in the same turn: its claim joins that record's transaction, after
    // it, and finds the lane free again.
    let woken = false;
    turn.onPart = (weight) => {
      if (weight !== 1 || woken) return;
      woken = true;
      queueMicrotask(() => worker.wake());
    };
    worker.start();
    await app.receiver().waitForCount(2, 10_000);
    await worker.stop();
    const [firstClaim, firstRecord, secondClaim, secondRecord] = turn.parts;
    assert.deepEqual(
      [firstClaim?.weight, firstRecord?.weight, secondClaim?.weight, secondRecord?.weight],
      // The second claim weighs the lanes free while the first batch still counts as in flight.
      [4, 1, 3, 1],
    );
    assert.equal(
      secondClaim?.trx[0],
      firstRecord?.trx[0],
      'the second claim shares the first record’s transaction',
    );
    // Stop waited for the second batch: its record is written and its claim released.
    assert.deepEqual(await deliveryRows(t.testStore.store.db), [
      [1, 'delivered', null],
      [2, 'delivered', null],
    ]);
    const open = await t.testStore.store.db
      .selectFrom('webhook_attempts')
      .select('id')
      .where('finished_at', 'is', null)
      .execute();
    assert.deepEqual(open, [], 'no attempt left open');
  });

  it('claims again alone when another part of its turn fails, and sends what that claim took', async () => {
    const t = app.t();
    await recordMessages(t, 2);
    const turn = new WatchedTurn(t.testStore.store.db);
    const worker = workerOver(t, turn);
    const attempted = worker.runOnce();
    // Added after the claim in the same turn: it fails, the shared transaction rolls back, and each part runs
    // again alone.
    const failing = turn.run(async (trx) => {
      await trx.selectFrom('webhook_deliveries').select('sequence').execute();
      throw new RangeError('this part fails');
    });
    await assert.rejects(failing, RangeError);
    assert.equal(await attempted, 2);
    const claim = turn.parts[0];
    assert.equal(claim?.trx.length, 2, 'run in the shared transaction, then alone');
    assert.notEqual(claim?.trx[0], claim?.trx[1]);
    assert.equal(app.receiver().requests.length, 2);
    assert.deepEqual(await deliveryRows(t.testStore.store.db), [
      [1, 'delivered', null],
      [2, 'delivered', null],
    ]);
  });
});
