/**
 * Write groups (src/store/write-groups.ts, docs/decisions/0056-write-groups.md): the writes of several tables run
 * as one statement on PostgreSQL, each query's parameters renumbered after those before it, and one after the other
 * on SQLite, when a table's rows span several statements (SQLite's values lists), or past the parameter bound. Counted on the SQL each
 * statement sends (the store's test-only hook), with the rows read back. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery } from 'kysely';
import { openStore, type Store } from '../../src/store/database.ts';
import { insertDeliveriesWrites, type NewDelivery } from '../../src/store/deliveries.ts';
import { createInstance } from '../../src/store/instances.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { PLAN_EACH_RUN } from '../../src/store/pg-statements.ts';
import { newRowId } from '../../src/store/row-ids.ts';
import { insertWebhookEventsWrites, type NewWebhookEvent } from '../../src/store/webhook-events.ts';
import {
  deferWrites,
  groupedStatement,
  MAX_GROUP_PARAMETERS,
  renumberParameters,
  runDeferredWrites,
  runWriteGroup,
} from '../../src/store/write-groups.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

describe('renumbering a statement’s parameters', () => {
  it('moves each $n by the offset, $10 as one number', () => {
    assert.equal(renumberParameters('select $1, $2 where a = $10', 3), 'select $4, $5 where a = $13');
  });

  it('leaves quoted strings and identifiers as they are, a doubled quote inside them included', () => {
    const text = `select '$1 it''s $2', "col$1""x", $1 from "t$2" where b = 'a' || $2`;
    assert.equal(
      renumberParameters(text, 5),
      `select '$1 it''s $2', "col$1""x", $6 from "t$2" where b = 'a' || $7`,
    );
  });

  it('leaves a $ not followed by a digit, and changes nothing at offset 0', () => {
    assert.equal(renumberParameters('select $a, $ , $1', 1), 'select $a, $ , $2');
    assert.equal(renumberParameters("select '", 0), "select '");
  });

  it('refuses an unterminated quote', () => {
    assert.throws(() => renumberParameters("select 'abc, $1", 1), RangeError);
    assert.throws(() => renumberParameters('select "abc, $1', 1), RangeError);
  });

  it('groups queries as WITH clauses of the last, parameters in order', () => {
    const grouped = groupedStatement([
      CompiledQuery.raw('insert into a values ($1, $2)', ['a1', 'a2']),
      CompiledQuery.raw('insert into b values ($1)', ['b1']),
      CompiledQuery.raw("insert into c values ($1, '$1')", ['c1']),
    ]);
    assert.equal(
      grouped.sql,
      "with w1 as (insert into a values ($1, $2)), w2 as (insert into b values ($3)) insert into c values ($4, '$1')",
    );
    assert.deepEqual(grouped.parameters, ['a1', 'a2', 'b1', 'c1']);
  });

  it('moves a query’s mark to be planned at each run to the front of the group', () => {
    const grouped = groupedStatement([
      CompiledQuery.raw(`${PLAN_EACH_RUN} update a set x = $1`, ['a1']),
      CompiledQuery.raw('select $1', ['b1']),
    ]);
    assert.equal(grouped.sql, `${PLAN_EACH_RUN} with w1 as (update a set x = $1) select $2`);
    assert.equal(
      groupedStatement([CompiledQuery.raw('select 1', []), CompiledQuery.raw('select 2', [])]).sql,
      'with w1 as (select 1) select 2',
    );
  });
});

for (const dialect of testDialects()) {
  describe(`write groups [${dialect}]`, () => {
    let testStore: TestStore;
    let counted: Store;
    let statements: string[] = [];
    let instanceId: string;

    before(async () => {
      testStore = await createTestStore(dialect);
      const record = (text: string) => void statements.push(text);
      counted = await openStore(
        testStore.database,
        testStore.schema === undefined ? { faults: record } : { schema: testStore.schema, faults: record },
      );
      const org = await createOrganization(testStore.store.db, { name: 'groups', plan: 'pro' });
      instanceId = (await createInstance(testStore.store.db, { orgId: org.id, env: 'test', name: 'groups' }))
        .id;
    });
    after(async () => {
      await counted.destroy();
      await testStore.cleanup();
    });

    /** `count` events from sequence `first` on, and one delivery for each. */
    function rows(first: number, count: number): { events: NewWebhookEvent[]; deliveries: NewDelivery[] } {
      const now = '2026-01-02T03:04:05.000Z';
      const events = Array.from({ length: count }, (_, index) => ({
        id: newRowId(),
        instanceId,
        sequence: first + index,
        type: 'Message',
        payload: `{"sequence":${first + index},"note":"it's $1"}`,
        skipReason: null,
        createdAt: now,
      }));
      const deliveries = events.map((event) => ({
        eventId: event.id,
        instanceId,
        sequence: event.sequence,
        maxAttempts: 5,
        runAt: Date.parse(now),
        now,
      }));
      return { events, deliveries };
    }

    /** Writes the events and deliveries as one group in a transaction; → the statements sent, BEGIN and COMMIT aside. */
    async function write(events: NewWebhookEvent[], deliveries: NewDelivery[]): Promise<string[]> {
      statements = [];
      await counted.db
        .transaction()
        .execute((trx) =>
          runWriteGroup(trx, [insertWebhookEventsWrites(events), insertDeliveriesWrites(deliveries)]),
        );
      return statements.filter((text) => !/^(begin|commit)/i.test(text));
    }

    /** The sequences of `table`'s rows of the instance from `first` to `first + 999`, ascending. */
    async function sequences(
      table: 'webhook_events' | 'webhook_deliveries',
      first: number,
    ): Promise<number[]> {
      const rows = await testStore.store.db
        .selectFrom(table)
        .select('sequence')
        .where('instance_id', '=', instanceId)
        .where('sequence', '>=', first)
        .where('sequence', '<', first + 1000)
        .orderBy('sequence')
        .execute();
      return rows.map((row) => Number(row.sequence));
    }

    async function stored(first: number): Promise<{ events: number[]; deliveries: number[] }> {
      return {
        events: await sequences('webhook_events', first),
        deliveries: await sequences('webhook_deliveries', first),
      };
    }

    /**
     * `sent` (BEGIN and COMMIT aside) wrote events and then their deliveries: one grouped statement on PostgreSQL,
     * the two inserts in that order on SQLite.
     */
    function assertEventsThenDeliveries(sent: string[]): void {
      if (dialect === 'postgres') {
        assert.equal(sent.length, 1, sent.join('\n'));
        assert.match(
          sent[0] ?? '',
          /^with w1 as \(insert into "webhook_events" .*\) insert into "webhook_deliveries"/,
        );
      } else {
        assert.deepEqual(
          sent.map((text) => /^insert into "(\w+)"/.exec(text)?.[1]),
          ['webhook_events', 'webhook_deliveries'],
          sent.join('\n'),
        );
      }
    }

    it('writes events and the deliveries that reference them: one statement on PostgreSQL, two on SQLite', async () => {
      const { events, deliveries } = rows(1, 3);
      assertEventsThenDeliveries(await write(events, deliveries));
      assert.deepEqual(await stored(1), { events: [1, 2, 3], deliveries: [1, 2, 3] });
      const payload = await testStore.store.db
        .selectFrom('webhook_events')
        .select('payload')
        .where('id', '=', events[1]?.id ?? '')
        .executeTakeFirstOrThrow();
      assert.equal(payload.payload, '{"sequence":2,"note":"it\'s $1"}');
    });

    it('writes put off run first in the next group of their transaction, or when the owner runs them', async () => {
      const { events, deliveries } = rows(5000, 2);
      statements = [];
      await counted.db.transaction().execute(async (trx) => {
        deferWrites(trx, [insertWebhookEventsWrites(events)]);
        await runDeferredWrites(counted.db); // another handle's: nothing of this transaction
        assert.equal(statements.filter((text) => /insert into/.test(text)).length, 0, 'nothing written yet');
        await runWriteGroup(trx, [insertDeliveriesWrites(deliveries)]);
        await runDeferredWrites(trx); // none left
      });
      assertEventsThenDeliveries(statements.filter((text) => !/^(begin|commit)/i.test(text)));
      assert.deepEqual(await stored(5000), { events: [5000, 5001], deliveries: [5000, 5001] });

      // Put off with no group after them: written by the owner's runDeferredWrites before the commit.
      const more = rows(5100, 1);
      statements = [];
      await counted.db.transaction().execute(async (trx) => {
        deferWrites(trx, [insertWebhookEventsWrites(more.events)]);
        deferWrites(trx, [insertDeliveriesWrites(more.deliveries)]);
        await runDeferredWrites(trx);
      });
      assert.equal(
        statements.filter((text) => !/^(begin|commit)/i.test(text)).length,
        dialect === 'postgres' ? 1 : 2,
      );
      assert.deepEqual(await stored(5100), { events: [5100], deliveries: [5100] });
    });

    it('fails whole when a row of the group is refused, and writes nothing', async () => {
      const { events, deliveries } = rows(10, 2);
      // A delivery of an event that is not in the group nor stored: its foreign key refuses it.
      const orphan = rows(12, 1).deliveries;
      await assert.rejects(write(events, [...deliveries, ...orphan]));
      assert.deepEqual(await stored(10), { events: [], deliveries: [] });
    });

    it('writes 501 rows a table as one group on PostgreSQL, one statement after the other on SQLite', async () => {
      const { events, deliveries } = rows(100, 501);
      const sent = await write(events, deliveries);
      if (dialect === 'postgres') {
        // A row set is one statement however many rows it has (src/store/row-sets.ts): still one group.
        assertEventsThenDeliveries(sent);
      } else {
        // 501 rows are two statements a table (at most 500 rows each): nothing grouped.
        assert.equal(sent.length, 4, sent.map((text) => text.slice(0, 40)).join('\n'));
        assert.ok(sent.every((text) => text.startsWith('insert into')));
      }
      const written = await stored(100);
      assert.equal(written.events.length, 501);
      assert.equal(written.deliveries.length, 501);
    });

    it('runs a group past the parameter bound one statement after the other', async () => {
      // Two statements whose parameters together pass the bound, each within it.
      const half = Math.floor(MAX_GROUP_PARAMETERS / 2) + 1;
      const counting = (n: number) =>
        CompiledQuery.raw(
          `select count(*) as n from (values ${Array.from({ length: n }, (_, k) => (dialect === 'postgres' ? `($${k + 1})` : '(?)')).join(', ')}) as v`,
          Array.from({ length: n }, (_, k) => k),
        );
      statements = [];
      await counted.db
        .transaction()
        .execute((trx) => runWriteGroup(trx, [[counting(half)], [counting(half)]]));
      const sent = statements.filter((text) => !/^(begin|commit)/i.test(text));
      assert.equal(sent.length, 2);
      assert.ok(sent.every((text) => text.startsWith('select count(*)')));
      // Within the bound, the same two are one statement on PostgreSQL.
      statements = [];
      await counted.db.transaction().execute((trx) => runWriteGroup(trx, [[counting(10)], [counting(10)]]));
      const together = statements.filter((text) => !/^(begin|commit)/i.test(text));
      assert.equal(together.length, dialect === 'postgres' ? 1 : 2);
    });
  });
}
