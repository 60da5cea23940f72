import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, Migrator, sql } from 'kysely';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { Store } from '../../src/store/database.ts';
import { releaseClaims } from '../../src/store/deliveries.ts';
import { LOCK_TAILS_POSTGRES } from '../../src/store/delivery-claim-statements.ts';
import { claimDeliveries } from '../../src/store/delivery-claims.ts';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import { removeDeadNodes } from '../../src/store/nodes.ts';
import { deleteEndpoint } from '../../src/store/webhook-endpoints.ts';
import { listLog, pruneWebhookLog } from '../../src/store/webhook-log.ts';
import { openTracedStore, planOf, type TracedStore } from '../support/plans.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The webhook deliveries' indexes after migration 0022 (docs/decisions/0061-claimed-delivery-index.md): the in-flight
 * index holds claimed rows only, the due and locked-by indexes are gone, and the statements that looked for claimed
 * rows read the in-flight index instead of the table.
 */

/**
 * Fills the store with a delivery history, then has the store gather its statistics, so that PostgreSQL plans as it
 * would on a store in use: two instances with 2,000 events each, all delivered but for 20 pending deliveries per
 * instance, 5 of them claimed by worker `w-1`.
 */
async function fillHistory(store: Store): Promise<void> {
  const org = await adminCreateOrg(store.db, { name: 'plans', plan: 'pro' });
  const now = Date.now();
  for (const name of ['a', 'b']) {
    const instance = await adminCreateInstance(store.db, { org: org.id, env: 'test', name });
    for (let start = 0; start < 2_000; start += 500) {
      const ids = Array.from({ length: 500 }, () => randomUUID());
      await store.db
        .insertInto('webhook_events')
        .values(
          ids.map((id, i) => ({
            id,
            instance_id: instance.id,
            sequence: start + i + 1,
            type: 'Message',
            payload: '{}',
            skip_reason: null,
            created_at: now,
          })),
        )
        .execute();
      await store.db
        .insertInto('webhook_deliveries')
        .values(
          ids.map((id, i) => {
            const sequence = start + i + 1;
            const pending = sequence > 1_980;
            const claimed = sequence > 1_995;
            return {
              event_id: id,
              instance_id: instance.id,
              sequence,
              status: pending ? 'pending' : 'delivered',
              attempts: pending && !claimed ? 0 : 1,
              max_attempts: 8,
              run_at: now,
              locked_by: claimed ? 'w-1' : null,
              locked_at: claimed ? now : null,
              last_error: null,
              last_status: pending ? null : 200,
              delivered_at: pending ? null : now,
              created_at: now,
              updated_at: now,
            };
          }),
        )
        .execute();
    }
  }
  await sql`analyze`.execute(store.db);
}

/** The indexes of `webhook_deliveries` by name, each with its definition (SQLite's SQL, PostgreSQL's indexdef). */
async function deliveryIndexes(store: Store): Promise<Map<string, string>> {
  const { rows } =
    store.dialect === 'sqlite'
      ? await sql<{
          name: string;
          definition: string | null;
        }>`select name, sql as definition from sqlite_schema
          where type = 'index' and tbl_name = 'webhook_deliveries'`.execute(store.db)
      : await sql<{
          name: string;
          definition: string | null;
        }>`select indexname as name, indexdef as definition
          from pg_indexes where schemaname = current_schema() and tablename = 'webhook_deliveries'`.execute(
          store.db,
        );
  return new Map(rows.map((row) => [row.name, row.definition ?? '']));
}

for (const dialect of testDialects()) {
  describe(`webhook deliveries: the in-flight index holds claimed rows only (docs/decisions/0061-claimed-delivery-index.md) [${dialect}]`, () => {
    let testStore: TestStore;
    let traced: TracedStore;

    before(async () => {
      testStore = await createTestStore(dialect);
      await fillHistory(testStore.store);
      traced = await openTracedStore(testStore);
    });
    after(async () => {
      await traced.store.destroy();
      await testStore.cleanup();
    });

    /** Runs `call` and returns the texts of the statements on `webhook_deliveries` it ran. */
    const statementsOf = (call: () => Promise<unknown>) => traced.statementsOf(call, 'webhook_deliveries');

    it('the in-flight index is partial on a set locked_at; the due and locked-by indexes are gone', async () => {
      const indexes = await deliveryIndexes(testStore.store);
      const inFlight = indexes.get('webhook_deliveries_in_flight') ?? '';
      assert.match(inFlight, /where \(?locked_at is not null\)?/i, inFlight);
      assert.equal(indexes.has('webhook_deliveries_due'), false);
      assert.equal(indexes.has('webhook_deliveries_locked_by'), false);
      assert.equal(indexes.has('webhook_deliveries_instance'), true);
    });

    it("the claim's in-flight tests read the in-flight index with a bound time, in either form", async () => {
      for (const instances of [undefined, ['i-1', 'i-2']]) {
        const texts = await statementsOf(() =>
          claimDeliveries(traced.store.db, dialect, {
            workerId: 'w-1',
            now: 1_000,
            staleBefore: 0,
            limit: 8,
            perLane: 32,
            ...(instances === undefined ? {} : { instances }),
          }),
        );
        const head = texts.find((text) => text.includes('"heads"'));
        assert.ok(head, texts.join('\n'));
        // `locked_at >= $n` implies `locked_at IS NOT NULL` on both stores: no literal needed.
        assert.match(head, /"o"\."locked_at" >= (\?|\$\d+)/);
        const plan = await planOf(testStore.store.db, dialect, head);
        assert.match(plan, /webhook_deliveries_in_flight/, plan);
      }
    });

    it("releasing a worker's or a dead node's claims reads the in-flight index, not the table", async () => {
      for (const call of [
        () => releaseClaims(traced.store.db, 'w-1'),
        () => removeDeadNodes(traced.store.db, ['n-1', 'n-2']),
      ]) {
        const [text, ...rest] = await statementsOf(call);
        assert.ok(text !== undefined && rest.length === 0, String(text));
        const plan = await planOf(testStore.store.db, dialect, text);
        assert.match(plan, /webhook_deliveries_in_flight/, plan);
      }
    });

    it("the delivery log filtered by status reads the lane's deliveries in that status, newest first", async () => {
      for (const status of ['pending', 'failed'] as const) {
        const [text, ...rest] = await statementsOf(() =>
          listLog(traced.store.db, 'i-1', { status, limit: 50 }),
        );
        assert.ok(text !== undefined && rest.length === 0, String(text));
        const plan = await planOf(testStore.store.db, dialect, text);
        assert.match(plan, /webhook_deliveries_instance/, plan);
        // The index gives the order: no sort of the instance's events.
        assert.doesNotMatch(plan, /TEMP B-TREE|Sort/, plan);
      }
    });

    it("deleting an endpoint finds its deliveries, delivered ones too, by the lane's index", async () => {
      const [text] = await statementsOf(() => deleteEndpoint(traced.store.db, 'i-1', 'e-1'));
      assert.ok(text !== undefined);
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.match(plan, /webhook_deliveries_instance/, plan);
    });

    // One statement for every lane's tail is PostgreSQL's alone (SQLite runs one a lane, in process). It is planned at
    // each run with its values, so its plan is read with values: a lane batch of 32 after each instance's head.
    if (dialect === 'postgres')
      it("a claim's tails are one statement over all its lanes, each lane read by the lane's index", async () => {
        const { rows: lanes } = await sql<{ id: string }>`select id from instances order by id`.execute(
          testStore.store.db,
        );
        const { rows } = await testStore.store.db.executeQuery<{ 'QUERY PLAN': string }>(
          CompiledQuery.raw(`explain ${LOCK_TAILS_POSTGRES}`, [
            'w-2',
            Date.now() + 1_000,
            0,
            31,
            lanes.map((lane) => lane.id),
            lanes.map(() => ''),
            lanes.map(() => 1_980),
            Date.now() + 1_000,
          ]),
        );
        const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
        assert.equal(lanes.length, 2);
        // An index scan in sequence order, or on a short lane a bitmap scan of its pending rows and their sort.
        assert.match(plan, /Index Scan (using|on) webhook_deliveries_instance/, plan);
        assert.match(plan, /LockRows/, plan);
        assert.doesNotMatch(plan, /Seq Scan on webhook_deliveries/, plan);
      });

    // SQLite chose the dropped due index here, reading every pending row. PostgreSQL chooses by the tables' sizes
    // between probing each old event's key and a merge over both keys (with sequential scans priced out, as
    // `planOf` does, the merge), so only SQLite's plan is pinned.
    if (dialect === 'sqlite')
      it("pruning the log tests each old event's pending delivery by its key", async () => {
        const [text] = await statementsOf(() =>
          pruneWebhookLog(traced.store.db, new Date(0).toISOString(), 10),
        );
        assert.ok(text !== undefined);
        const plan = await planOf(testStore.store.db, dialect, text);
        assert.match(
          plan,
          /SEARCH d USING (COVERING )?INDEX sqlite_autoindex_webhook_deliveries_1 \(event_id=\?/,
          plan,
        );
      });
  });

  describe(`migration 0022 goes down and up again [${dialect}]`, () => {
    let t: TestStore;
    before(async () => {
      t = await createTestStore(dialect);
    });
    after(() => t.cleanup());

    it('down restores the full in-flight and due indexes (and locked-by on PostgreSQL); up makes them live-only', async () => {
      const migrator = new Migrator({
        db: t.store.db,
        provider: migrationProvider,
        ...(t.store.schema === undefined ? {} : { migrationTableSchema: t.store.schema }),
      });
      const down = await migrator.migrateTo('0021_send_jobs_live_index');
      if (down.error) throw down.error;
      const before = await deliveryIndexes(t.store);
      assert.doesNotMatch(before.get('webhook_deliveries_in_flight') ?? '', /where/i);
      assert.equal(before.has('webhook_deliveries_due'), true);
      assert.equal(before.has('webhook_deliveries_locked_by'), dialect === 'postgres');
      const up = await migrator.migrateToLatest();
      if (up.error) throw up.error;
      const after = await deliveryIndexes(t.store);
      assert.match(after.get('webhook_deliveries_in_flight') ?? '', /where \(?locked_at is not null\)?/i);
      assert.equal(after.has('webhook_deliveries_due'), false);
      assert.equal(after.has('webhook_deliveries_locked_by'), false);
    });
  });
}
