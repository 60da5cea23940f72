import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import pg from 'pg';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { ADVANCE_MANY_MARKING_POSTGRES } from '../../src/store/advance-marks.ts';
import { LOCK_TAILS_POSTGRES } from '../../src/store/delivery-claim-statements.ts';
import { deliveredGroupQuery, type GroupRecord, startGroupQuery } from '../../src/store/delivery-group.ts';
import type { NextAttempt } from '../../src/store/delivery-next.ts';
import { ABANDONED, CLAIM_DETAILS_POSTGRES } from '../../src/store/delivery-starts.ts';
import { KEY_LOOKUP_SETTINGS } from '../../src/store/pg-key-lookups.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The plans of the key-lookup statements (docs/decisions/0086-generic-key-lookup-plans.md), the delivery groups, the claim's
 * details and tails: the generic plan each connection makes once under the settings they run with, whatever the tables held
 * when it was made, looks every row up in an index by keys of the statement's input (the deliveries by their primary
 * key), and reads no table or index whole: on a store never analysed, on one analysed while empty (the plan then kept
 * as the tables grow), on one analysed at 50 rows, and once analysed with thousands.
 */

/** One plan node of `EXPLAIN (FORMAT JSON)`, with the fields these tests read. */
interface PlanNode {
  'Node Type': string;
  'Parent Relationship'?: string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** Every node of `plan`, depth first. */
function nodesOf(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodesOf)];
}

/** A claimed next delivery of event `e<n>` for the default webhook. */
function next(n: number): NextAttempt {
  return {
    eventId: `e${n}`,
    endpointId: '',
    lockedAt: 1_700_000_000_000,
    attemptId: `b${n}`,
    attemptNumber: 1,
    url: 'https://receiver.example/hook',
    urlSealed: '',
    hmacKeySealed: 'sealed',
    endpointSecretSealed: '',
  };
}

/** Six delivered records of one lane, each with a next delivery to start. */
const RECORDS: GroupRecord[] = Array.from({ length: 6 }, (_, n) => ({
  takes: true,
  input: {
    eventId: `e${n}`,
    instanceId: 'i1',
    attemptId: `a${n}`,
    workerId: 'w-1',
    lockedAt: 1_700_000_000_000,
    next: next(n + 100),
    attempt: { statusCode: 200, durationMs: 3, responseBody: 'ok', responseTruncated: false },
    outcome: { kind: 'delivered' },
    now: '2026-12-05T00:00:00.000Z',
  } as GroupRecord['input'],
}));

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`key-lookup plans (${dialect})`, () => {
    let testStore: TestStore;

    before(async () => {
      testStore = await createTestStore(dialect);
    });
    after(async () => {
      await testStore.cleanup();
    });

    /**
     * The generic plan of `query` under the key-lookup settings, as a connection makes it at the statement's first
     * run (`PREPARE`, then `EXPLAIN EXECUTE` with `force_generic_plan`, on a connection of its own): every node,
     * depth first.
     */
    async function planNodes(query: CompiledQuery): Promise<PlanNode[]> {
      const { database, schema } = testStore;
      assert.equal(database.dialect, 'postgres');
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        if (schema !== undefined) await client.query(`set search_path to ${schema}`);
        await client.query(`prepare probe as ${query.sql}`);
        await client.query('begin');
        for (const setting of KEY_LOOKUP_SETTINGS) await client.query(`set local ${setting}`);
        // A generic plan does not look at the values: every parameter is null.
        const values = query.parameters.map(() => 'null').join(', ');
        const result = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
          `explain (format json) execute probe(${values})`,
        );
        await client.query('rollback');
        const plan = result.rows[0]?.['QUERY PLAN'][0]?.Plan;
        assert.ok(plan, 'EXPLAIN returned a plan');
        return nodesOf(plan);
      } finally {
        await client.end();
      }
    }

    /** The node of `read` (a scan of a table) that looks its rows up: itself, or a bitmap scan's index scan. */
    function lookupOf(read: PlanNode): PlanNode | undefined {
      return read['Node Type'] === 'Bitmap Heap Scan'
        ? (read.Plans ?? []).find((child) => child['Node Type'] === 'Bitmap Index Scan')
        : read;
    }

    /**
     * Asserts that `nodes` read every table by a lookup in an index with a condition (an index scan, or a bitmap scan
     * of one), the deliveries by one of `deliveryIndexes` (default their primary key), and no table or index whole;
     * and that they read each of `tables`.
     */
    function assertKeyLookups(
      nodes: PlanNode[],
      tables = ['webhook_attempts', 'webhook_deliveries'],
      deliveryIndexes = ['webhook_deliveries_pkey'],
    ): void {
      const reads = nodes.filter(
        (node) => node['Relation Name'] !== undefined && node['Node Type'] !== 'ModifyTable',
      );
      const read = new Set(reads.map((node) => node['Relation Name']));
      for (const table of tables) assert.ok(read.has(table), `${table} is read: ${[...read]}`);
      for (const node of reads) {
        const lookup = lookupOf(node);
        assert.ok(lookup, `a bitmap scan reads an index: ${JSON.stringify(node)}`);
        assert.match(lookup['Node Type'], /^(Index|Index Only|Bitmap Index) Scan$/, JSON.stringify(node));
        assert.ok(lookup['Index Cond'], `a lookup, not a scan of the whole index: ${JSON.stringify(node)}`);
        if (node['Relation Name'] === 'webhook_deliveries')
          assert.ok(deliveryIndexes.includes(lookup['Index Name'] ?? ''), JSON.stringify(node));
      }
    }

    /** Checks the plans of the five key-lookup statements. */
    async function assertPlans(): Promise<void> {
      const keys = RECORDS.map((_, n) => ({ event_id: `g${n * 7 + 1}`, endpoint_id: '' }));
      assertKeyLookups(
        await planNodes(
          CompiledQuery.raw(CLAIM_DETAILS_POSTGRES, [
            keys.map((key) => key.event_id),
            keys.map((key) => key.endpoint_id),
            keys.map((key) => key.event_id),
            keys.map((key) => key.endpoint_id),
            1_700_000_000_000,
            ABANDONED,
          ]),
        ),
      );
      assertKeyLookups(await planNodes(deliveredGroupQuery(RECORDS)));
      const tails = await planNodes(
        CompiledQuery.raw(LOCK_TAILS_POSTGRES, [
          'w-1',
          1_700_000_000_000,
          1_699_999_000_000,
          31,
          ['i1'],
          [''],
          [7],
          1_700_000_000_000,
        ]),
      );
      assertKeyLookups(
        tails,
        ['webhook_deliveries'],
        ['webhook_deliveries_pkey', 'webhook_deliveries_instance'],
      );
      assert.deepEqual(
        tails
          .filter(
            (node) => node['Relation Name'] === 'webhook_deliveries' && node['Node Type'] !== 'ModifyTable',
          )
          .map((node) => lookupOf(node)?.['Index Name']),
        ['webhook_deliveries_instance', 'webhook_deliveries_pkey'],
        "each lane read through the lanes' index, its rows locked by their key",
      );
      // The sequence's advance with the sent marks riding on it (docs/decisions/0087-sent-marks-with-the-advance.md):
      // each job looked up by its key.
      const advance = await planNodes(
        CompiledQuery.raw(ADVANCE_MANY_MARKING_POSTGRES, [['i1'], [1], ['i1'], ['j1'], [1_700_000_000_000]]),
      );
      assertKeyLookups(advance, ['send_jobs', 'instances', 'webhook_endpoints']);
      assert.deepEqual(
        advance
          .filter((node) => node['Relation Name'] === 'send_jobs' && node['Node Type'] !== 'ModifyTable')
          .map((node) => lookupOf(node)?.['Index Name']),
        ['send_jobs_pk'],
        'the jobs read by their key',
      );
      assertKeyLookups(
        await planNodes(
          startGroupQuery(
            RECORDS.map((_, n) => next(n)),
            'w-1',
            1_700_000_000_000,
          ),
        ),
      );
    }

    /** The instance the rows of {@link grow} belong to, made at its first call. */
    let instanceId: string | undefined;

    /**
     * Adds events `g<from>` to `g<to>`, each with a delivery to the default webhook (one in ten pending, half of those
     * claimed by `w-1`) and a finished attempt `ga<n>`.
     */
    async function grow(from: number, to: number): Promise<void> {
      const db = testStore.store.db;
      if (instanceId === undefined) {
        const org = await adminCreateOrg(db, { name: 'plans', plan: 'pro' });
        instanceId = (await adminCreateInstance(db, { org: org.id, env: 'test', name: 'a' })).id;
      }
      await sql`
        insert into webhook_events (id, instance_id, sequence, type, payload, skip_reason, created_at)
        select 'g' || n, ${instanceId}, n, 'Message', '{}', null, 0 from generate_series(${from}::int, ${to}::int) n
      `.execute(db);
      await sql`
        insert into webhook_deliveries (event_id, instance_id, sequence, status, attempts, max_attempts, run_at,
          locked_by, locked_at, last_error, last_status, delivered_at, created_at, updated_at)
        select 'g' || n, ${instanceId}, n, case when n % 10 = 0 then 'pending' else 'delivered' end, 1, 8, 0,
          case when n % 20 = 0 then 'w-1' end, case when n % 20 = 0 then 1 end, null, 200, 0, 0, 0
        from generate_series(${from}::int, ${to}::int) n
      `.execute(db);
      await sql`
        insert into webhook_attempts (id, event_id, endpoint_id, number, url, worker, attempted_at, finished_at,
          status_code, duration_ms, error, response_body, response_truncated)
        select 'ga' || n, 'g' || n, '', 1, 'https://receiver.example/hook', 'w-1', 0, 1, 200, 3, null, 'ok', 0
        from generate_series(${from}::int, ${to}::int) n
      `.execute(db);
    }

    // The states run in order on one store.
    it('looks rows up by key on a store never analysed', async () => {
      await assertPlans();
    });

    it('looks rows up by key on a store analysed while empty', async () => {
      await sql`analyze`.execute(testStore.store.db);
      await assertPlans();
    });

    it('looks rows up by key once the tables grew by thousands of rows past the statistics of an empty store', async () => {
      await grow(1, 5000);
      await assertPlans();
    });

    it('looks rows up by key once those rows are analysed', async () => {
      await sql`analyze`.execute(testStore.store.db);
      await assertPlans();
    });

    it('looks rows up by key on tables analysed at 50 rows', async () => {
      await sql`truncate webhook_attempts, webhook_deliveries, webhook_events`.execute(testStore.store.db);
      await grow(1, 50);
      await sql`analyze`.execute(testStore.store.db);
      await assertPlans();
      await grow(51, 5000);
      await assertPlans();
    });
  });
}
