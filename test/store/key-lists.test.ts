/**
 * Lists of delivery keys (`keyIn`, src/store/delivery-starts.ts; docs/decisions/0084-key-lists.md): a row matches
 * only when its event and its endpoint are one of the pairs given, never an event of one pair with the endpoint of
 * another; on PostgreSQL the list is looked up through the primary key's leading column and matched by a join, on
 * SQLite it is a list of row values. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isPostgres } from '../../src/store/compiled.ts';
import { insertDeliveriesWrites } from '../../src/store/deliveries.ts';
import { type DeliveryKey, keyIn } from '../../src/store/delivery-starts.ts';
import { createInstance } from '../../src/store/instances.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { newRowId } from '../../src/store/row-ids.ts';
import { insertWebhookEventsWrites } from '../../src/store/webhook-events.ts';
import { runWriteGroup } from '../../src/store/write-groups.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const NOW = '2026-01-02T03:04:05.000Z';

for (const dialect of testDialects()) {
  describe(`delivery key lists [${dialect}]`, () => {
    let testStore: TestStore;
    let statements: string[] = [];
    const a = newRowId();
    const b = newRowId();
    const c = newRowId();

    before(async () => {
      testStore = await createTestStore(dialect, { faults: (text) => void statements.push(text) });
      const { db } = testStore.store;
      const org = await createOrganization(db, { name: 'keys', plan: 'pro' });
      const instanceId = (await createInstance(db, { orgId: org.id, env: 'test', name: 'keys' })).id;
      const events = [a, b, c].map((id, index) => ({
        id,
        instanceId,
        sequence: index + 1,
        type: 'Message',
        payload: '{}',
        skipReason: null,
        createdAt: NOW,
      }));
      // Event a goes to the default webhook and endpoint e1; b to e1 only; c to the default webhook only.
      const delivery = (eventId: string, sequence: number, endpointId?: string) => ({
        eventId,
        instanceId,
        sequence,
        maxAttempts: 5,
        runAt: Date.parse(NOW),
        now: NOW,
        ...(endpointId === undefined ? {} : { endpointId }),
      });
      await db
        .transaction()
        .execute((trx) =>
          runWriteGroup(trx, [
            insertWebhookEventsWrites(events),
            insertDeliveriesWrites([
              delivery(a, 1),
              delivery(a, 1, 'e1'),
              delivery(b, 2, 'e1'),
              delivery(c, 3),
            ]),
          ]),
        );
    });
    after(() => testStore.cleanup());

    /** The deliveries whose key is in `keys`, as `event:endpoint` sorted; the statements it sent. */
    async function matching(keys: DeliveryKey[]): Promise<string[]> {
      statements = [];
      const { db } = testStore.store;
      const rows = await db
        .selectFrom('webhook_deliveries')
        .select(['event_id', 'endpoint_id'])
        .where((eb) => keyIn(eb, keys, isPostgres(db)))
        .execute();
      const name = (id: string) => ({ [a]: 'a', [b]: 'b', [c]: 'c' })[id] ?? id;
      return rows.map((row) => `${name(row.event_id)}:${row.endpoint_id}`).sort();
    }

    it('matches pairs, never one pair’s event with another’s endpoint', async () => {
      // (a, '') and (b, 'e1') are stored; (a, 'e1') is too but not asked for; (b, '') and (c, 'e1') are not stored,
      // though each of their parts is in another pair.
      assert.deepEqual(
        await matching([
          { event_id: a, endpoint_id: '' },
          { event_id: b, endpoint_id: 'e1' },
          { event_id: b, endpoint_id: '' },
          { event_id: c, endpoint_id: 'e1' },
        ]),
        ['a:', 'b:e1'],
      );
      assert.deepEqual(await matching([{ event_id: a, endpoint_id: 'e1' }]), ['a:e1']);
      assert.deepEqual(await matching([{ event_id: newRowId(), endpoint_id: '' }]), []);
    });

    it('is looked up by the primary key’s leading column and a join on PostgreSQL, row values on SQLite', async () => {
      await matching([
        { event_id: a, endpoint_id: '' },
        { event_id: c, endpoint_id: '' },
      ]);
      const [text] = statements;
      if (dialect === 'postgres')
        assert.match(
          text ?? '',
          /where \("event_id" = any \(array\[\$1, \$2\]::varchar\[\]\) and \("event_id", "endpoint_id"\) in \(select \* from unnest\(array\[\$3, \$4\]::varchar\[\], array\[\$5, \$6\]::varchar\[\]\)\)\)$/,
        );
      else assert.match(text ?? '', /where \("event_id", "endpoint_id"\) in \(\(\?, \?\), \(\?, \?\)\)$/);
    });
  });
}
