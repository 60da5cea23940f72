import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimDeliveries } from '../../src/store/delivery-claims.ts';
import { newRowId } from '../../src/store/row-ids.ts';
import { testDialects } from '../support/store.ts';
import { recordMessages, webhookAppPerTest } from '../webhooks/support.ts';

/** A UUID of version 7 and the RFC 9562 variant. */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Whether `ids` sort one after the other, strictly, as strings (the order of a text index). */
const ascending = (ids: readonly string[]) => ids.every((id, i) => i === 0 || (ids[i - 1] ?? '') < id);

/** Time-ordered row ids (docs/decisions/0052-time-ordered-row-ids.md). */
describe('row ids', () => {
  it('are version 7 UUIDs carrying their creation time, each sorting after the one made before it', () => {
    const before = Date.now();
    const ids = Array.from({ length: 2000 }, () => newRowId());
    const after = Date.now();
    assert.deepEqual(
      ids.filter((id) => !UUID_V7.test(id)),
      [],
    );
    assert.ok(ascending(ids), 'strictly ascending');
    assert.equal(new Set(ids).size, ids.length);
    for (const id of [ids[0] ?? '', ids.at(-1) ?? '']) {
      const ms = Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
      assert.ok(
        ms >= before && ms <= after + 1,
        `${id} carries its creation time (${ms} in ${before}…${after})`,
      );
    }
  });

  it('still ascend when many are made in one millisecond and when the clock goes back', (t) => {
    let now = Date.now() + 60_000;
    t.mock.method(Date, 'now', () => now);
    const ms = (id: string) => Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
    const first = Array.from({ length: 5000 }, () => newRowId());
    now -= 5_000;
    const after = Array.from({ length: 100 }, () => newRowId());
    const ids = [...first, ...after];
    assert.ok(ascending(ids), 'strictly ascending across the step back');
    assert.equal(new Set(ids).size, ids.length);
    assert.ok(ids.every((id) => UUID_V7.test(id)));
    assert.ok(
      // A counter overflow (about one run in 430,000, from its random start) moves it one millisecond on.
      ids.every((id) => ms(id) === now + 5_000 || ms(id) === now + 5_001),
      'the time stays at the latest millisecond seen instead of going back',
    );
  });

  for (const dialect of testDialects()) {
    describe(`on the hot path (${dialect})`, () => {
      const app = webhookAppPerTest({ dialect, webhookWorker: { start: false, laneBatch: 8 } });

      it('events get ids in sequence order, and their attempts ids after them', async () => {
        const t = app.t();
        const db = t.testStore.store.db;
        await recordMessages(t, 6);
        const events = await db
          .selectFrom('webhook_events')
          .select(['id', 'sequence', 'type'])
          .where('instance_id', '=', t.instance.id)
          .where('type', '=', 'Message')
          .orderBy('sequence')
          .execute();
        assert.equal(events.length, 6);
        assert.ok(events.every((event) => UUID_V7.test(event.id)));
        assert.ok(ascending(events.map((event) => event.id)), 'event ids ascend with sequence');
        const now = t.clock();
        const batch = await claimDeliveries(db, dialect, {
          workerId: 'w1',
          now,
          // Due times are judged on the store's clock (docs/decisions/0005-outbox-and-delivery.md, "Due times").
          dueAt: t.services.webhooks.dueNow(),
          staleBefore: t.services.webhooks.staleBefore(now),
          limit: 8,
          perLane: 8,
        });
        const attempts = batch.map((delivery) => delivery.attemptId).sort();
        assert.equal(attempts.length, 6);
        assert.ok(attempts.every((id) => UUID_V7.test(id)));
        // Made after the events, in one claim: they sort after every event's id, so they go to the index's end.
        assert.ok((attempts[0] ?? '') > (events.at(-1)?.id ?? 'z'), 'attempt ids sort after the event ids');
      });
    });
  }
});
