import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextAttemptOf, startDeliveries } from '../../src/store/delivery-next.ts';
import { testDialects } from '../support/store.ts';
import { claimLane, webhookAppPerTest } from './support.ts';

/**
 * A lane window's opening on PostgreSQL in one statement (docs/decisions/0059-lane-record-groups.md): deliveries
 * started in order up to the first that cannot be, one already started by a lost try counting as started.
 */
describe('webhook lane window openings in one statement (postgres)', {
  skip: !testDialects().includes('postgres'),
}, () => {
  const app = webhookAppPerTest({ dialect: 'postgres', webhookWorker: { start: false, laneBatch: 6 } });
  /** The lane's six deliveries claimed by `w1` (only the first started). */
  const claimSix = () => claimLane(app.t(), 'postgres', 6);
  /** [sequence, attempts, locked_by] per delivery, and how many attempt rows each has. */
  const state = async () => {
    const db = app.t().testStore.store.db;
    const rows = await db
      .selectFrom('webhook_deliveries as d')
      .leftJoin('webhook_attempts as a', (join) =>
        join.onRef('a.event_id', '=', 'd.event_id').onRef('a.endpoint_id', '=', 'd.endpoint_id'),
      )
      .select(['d.sequence', 'd.attempts', 'd.locked_by', (eb) => eb.fn.count<string>('a.id').as('rows')])
      .groupBy(['d.sequence', 'd.attempts', 'd.locked_by'])
      .orderBy('d.sequence')
      .execute();
    return rows.map((row) => [Number(row.sequence), row.attempts, row.locked_by, Number(row.rows)]);
  };

  it('starts the deliveries in order and stops at the first that cannot be started', async () => {
    const { batch, now } = await claimSix();
    const [, d2, d3, d4, d5] = batch;
    assert.ok(d2 && d3 && d4 && d5);
    const store = app.t().testStore.store;
    // d4's claim as another worker would hold it: d4 and everything after it stay unstarted.
    const opening = [d2, d3, { ...d4, lockedAt: d4.lockedAt - 1 }, d5].map(nextAttemptOf);
    assert.equal(await startDeliveries(store.db, opening, 'w1', now, 'postgres'), 2);
    assert.deepEqual(await state(), [
      [1, 1, 'w1', 1],
      [2, 1, 'w1', 1],
      [3, 1, 'w1', 1],
      [4, 0, 'w1', 0],
      [5, 0, 'w1', 0],
      [6, 0, 'w1', 0],
    ]);
  });

  it('counts a delivery whose attempt row a lost try wrote as started, without counting it again', async () => {
    const { batch, now } = await claimSix();
    const [, d2, d3] = batch;
    assert.ok(d2 && d3);
    const store = app.t().testStore.store;
    assert.equal(await startDeliveries(store.db, [nextAttemptOf(d2)], 'w1', now, 'postgres'), 1);
    // The same opening tried again after its answer was lost, with the next one too.
    assert.equal(await startDeliveries(store.db, [d2, d3].map(nextAttemptOf), 'w1', now, 'postgres'), 2);
    assert.deepEqual((await state()).slice(0, 4), [
      [1, 1, 'w1', 1],
      [2, 1, 'w1', 1],
      [3, 1, 'w1', 1],
      [4, 0, 'w1', 0],
    ]);
  });
});
