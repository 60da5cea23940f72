/**
 * Sends accepted one after the other go out in that order when the node's estimate of the store's clock steps back
 * between them (docs/decisions/0112-send-due-times-on-the-store-clock.md): a reading of the store's clock whose answer
 * came late (a slow round trip, a busy process) puts the estimate ahead by up to half that round trip, and the next
 * reading takes it back. A send's due time (`run_at`), set at its acceptance on that estimate, orders the instance's
 * queue before its acceptance order (`seq`), so the later send, due "earlier", went out first. The send queue's due
 * clock never goes back in a process. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
const PEER = '5511999990002';
const ASYNC = { prefer: 'respond-async' };

for (const dialect of testDialects()) {
  describe(`sends accepted as the store clock's estimate steps back [${dialect}]`, () => {
    let t: TestApp;
    /** What the store answers for its clock at the next reading, and the monotonic time. */
    let storeReads = T0;
    let monotonic = 0;
    /** The reading's round trip, ms of the monotonic clock (its answer arrives at its end). */
    let roundTrip = 0;
    const storeClock = new StoreClock({
      db: undefined as never,
      logger: pino({ level: 'silent' }),
      wall: () => storeReads,
      monotonic: () => monotonic,
      read: async () => {
        const read = storeReads;
        monotonic += roundTrip;
        return read;
      },
    });

    before(async () => {
      t = await createTestApp({ dialect, storeClock, sendDueOnStoreClock: true });
      t.clock.set(T0);
      await storeClock.sync();
      await loginSandbox(t);
    });
    after(() => t.close());

    it('relays them in acceptance order', async () => {
      // A pace holds every send after the first in the queue.
      const paced = await t.call('PUT', '/v1/session/pacing', { minIntervalMs: 600_000, jitterMs: 0 });
      assert.equal(paced.status, 200);
      const opener = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'opener' });
      assert.equal(opener.status, 200, JSON.stringify(opener.body));
      // A reading that took 40 ms, the store reading its clock at the end (the statement waited on its way there): the
      // estimate puts that reading at the round trip's middle, 20 ms ahead of the store.
      storeReads = T0 + 1_040;
      roundTrip = 40;
      await storeClock.sync();
      const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'first' }, ASYNC);
      assert.equal(first.status, 202);
      // The next reading answers at once: the estimate goes back to the store's time, 20 ms.
      roundTrip = 0;
      await storeClock.sync();
      const second = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'second' }, ASYNC);
      assert.equal(second.status, 202);
      const ids = [first.body.data.id as string, second.body.data.id as string];

      storeReads = T0 + 60_000;
      await storeClock.sync();
      assert.equal((await t.call('PUT', '/v1/session/pacing', {})).status, 200);
      const sent = await eventually('both sent', async () => {
        const rows = await t.services.store.db
          .selectFrom('messages')
          .select(['id', 'created_at'])
          .where('id', 'in', ids)
          .execute();
        return rows.length === 2 ? rows : undefined;
      });
      assert.equal(sent.length, 2);
      const events = await t.services.store.db
        .selectFrom('webhook_events')
        .select(['payload'])
        .where('instance_id', '=', t.instance.id)
        .where('type', '=', 'MessageStatus')
        .orderBy('sequence')
        .execute();
      const order = events
        .map((row) => JSON.parse(row.payload).event)
        .filter((event) => ids.includes(event.id) && event.status === 'sent')
        .map((event) => event.id);
      assert.deepEqual(order, ids, 'sent in acceptance order');
    });
  });
}
