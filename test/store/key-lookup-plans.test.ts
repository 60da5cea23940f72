import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { deliveredGroupQuery, type GroupRecord, startGroupQuery } from '../../src/store/delivery-group.ts';
import type { NextAttempt } from '../../src/store/delivery-next.ts';
import { ABANDONED, CLAIM_DETAILS_POSTGRES } from '../../src/store/delivery-starts.ts';
import { KEY_LOOKUP_SETTINGS } from '../../src/store/pg-key-lookups.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The plans of the key-lookup statements (docs/decisions/0085-key-lookup-plans.md), the delivery groups and the claim's
 * details: with the settings they run under and their values, PostgreSQL looks every webhook attempt and delivery up
 * in an index (the deliveries by their primary key), on a store that was
 * never analysed, on one that grew by thousands of rows after it was analysed empty, and once analysed with them.
 */

/** One plan node of `EXPLAIN (FORMAT JSON)`, with the fields these tests read. */
interface PlanNode {
  'Node Type': string;
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

    /** The plan of `query` with its values under the key-lookup settings: every node, depth first. */
    async function planNodes(query: CompiledQuery): Promise<PlanNode[]> {
      return testStore.store.db.transaction().execute(async (trx) => {
        for (const setting of KEY_LOOKUP_SETTINGS) await sql.raw(`set local ${setting}`).execute(trx);
        const result = await trx.executeQuery<{ 'QUERY PLAN': { Plan: PlanNode }[] }>({
          ...query,
          sql: `explain (format json) ${query.sql}`,
        });
        const plan = result.rows[0]?.['QUERY PLAN'][0]?.Plan;
        assert.ok(plan, 'EXPLAIN returned a plan');
        return nodesOf(plan);
      });
    }

    /**
     * Asserts that `nodes` read attempts and deliveries by a lookup in an index (the deliveries by their primary key),
     * and no table whole.
     */
    function assertKeyLookups(nodes: PlanNode[]): void {
      const reads = nodes.filter(
        (node) =>
          node['Node Type'] !== 'ModifyTable' &&
          ['webhook_attempts', 'webhook_deliveries'].includes(node['Relation Name'] ?? ''),
      );
      assert.ok(reads.length >= 3, `the plan reads attempts and deliveries: ${reads.length}`);
      for (const node of reads) {
        assert.match(node['Node Type'], /^Index (Only )?Scan$/, JSON.stringify(node));
        if (node['Relation Name'] === 'webhook_deliveries')
          assert.equal(node['Index Name'], 'webhook_deliveries_pkey', JSON.stringify(node));
        assert.ok(node['Index Cond'], `a lookup, not a scan of the whole index: ${JSON.stringify(node)}`);
      }
      assert.deepEqual(
        nodes.filter((node) => node['Node Type'] === 'Seq Scan').map((node) => node['Relation Name']),
        [],
      );
    }

    /** Checks the plans of the three key-lookup statements. */
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

    it('looks rows up by key on a store never analysed', async () => {
      await assertPlans();
    });

    it('looks rows up by key once the tables grew past the statistics of an empty store', async () => {
      const db = testStore.store.db;
      await sql`analyze`.execute(db);
      const org = await adminCreateOrg(db, { name: 'plans', plan: 'pro' });
      const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'a' });
      await sql`
        insert into webhook_events (id, instance_id, sequence, type, payload, skip_reason, created_at)
        select 'g' || n, ${instance.id}, n, 'Message', '{}', null, 0 from generate_series(1, 5000) n
      `.execute(db);
      await sql`
        insert into webhook_deliveries (event_id, instance_id, sequence, status, attempts, max_attempts, run_at,
          locked_by, locked_at, last_error, last_status, delivered_at, created_at, updated_at)
        select 'g' || n, ${instance.id}, n, case when n > 4990 then 'pending' else 'delivered' end, 1, 8, 0,
          case when n > 4995 then 'w-1' end, case when n > 4995 then 1 end, null, 200, 0, 0, 0
        from generate_series(1, 5000) n
      `.execute(db);
      await sql`
        insert into webhook_attempts (id, event_id, endpoint_id, number, url, worker, attempted_at, finished_at,
          status_code, duration_ms, error, response_body, response_truncated)
        select 'ga' || n, 'g' || n, '', 1, 'https://receiver.example/hook', 'w-1', 0, 1, 200, 3, null, 'ok', 0
        from generate_series(1, 5000) n
      `.execute(db);
      await assertPlans();
    });

    it('looks rows up by key once those rows are analysed', async () => {
      await sql`analyze`.execute(testStore.store.db);
      await assertPlans();
    });
  });
}
