/**
 * The recorder's turns on PostgreSQL (docs/decisions/0082-recorder-turns-on-postgres.md): the batches of several
 * instances ready in one turn share one transaction, take their sequence numbers in one statement and write their
 * rows in one write group; a batch that fails after the numbers were taken leaves no gap, and a commit whose answer
 * was lost writes nothing twice. Only PostgreSQL (TEST_DATABASE_URL): SQLite's batches share the turn's transaction
 * of docs/decisions/0051-turn-groups.md, tested in shared-turn.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { Transaction } from 'kysely';
import type { Instance } from '../../src/domain/instance.ts';
import type { EventProjection } from '../../src/events/recorder.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { type LostCommitAfter, loseNextCommitAfter } from '../support/lost-commits.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { textMessage } from '../webhooks/support.ts';

/** The statement that takes several instances' numbers at once (src/store/shared-advances.ts). */
const ADVANCE_MANY = /^insert into webhook_state \(instance_id, last_sequence\)\s+select u\.id/;
/** The statement that takes one instance's numbers (`ADVANCE`, src/store/instance-routing.ts). */
const ADVANCE_ONE = /^insert into "webhook_state"/;
/** A write group holding message rows (src/store/write-groups.ts). */
const MESSAGE_GROUP = /^with w1 as \(insert into "messages"/;

describe('recorder turns on PostgreSQL', { skip: !testDialects().includes('postgres') }, () => {
  let testStore: TestStore;
  let t: TestApp;
  let instances: Instance[];
  /** The SQL text of every statement the store ran since the test began. */
  const statements: string[] = [];
  /** Instance ids whose batch fails in its flush, after its numbers were taken. */
  const failFlush = new Set<string>();
  /** While armed, the next commit of a transaction that took several instances' numbers is carried out, then lost. */
  let commits: LostCommitAfter | undefined;

  before(async () => {
    const lostCommits = loseNextCommitAfter(ADVANCE_MANY);
    commits = lostCommits;
    testStore = await createTestStore('postgres', {
      faults: (sql) => {
        statements.push(sql);
        lostCommits.seen(sql);
      },
    });
    t = await createTestApp({ dialect: 'postgres', testStore, webhookWorker: { start: false } });
    // The free plan allows two test instances; the third is a live one (only its rows matter here).
    instances = [t.instance, await t.newInstance(), await t.newInstance('live')];
    const failing: EventProjection = {
      name: 'test-failing-flush',
      async apply() {},
      async flush(_trx: Transaction<Database>, instanceId: string) {
        if (failFlush.has(instanceId)) throw new Error(`flush of ${instanceId} failed`);
      },
    };
    t.services.recorder.use(failing);
  });
  after(async () => {
    commits?.restore();
    await t.close();
    await testStore.cleanup();
  });
  beforeEach(() => {
    statements.length = 0;
    failFlush.clear();
  });

  /** Each instance's events as `[sequence, text]`, in sequence order. */
  const eventsOf = async (instance: Instance) =>
    (
      await t.testStore.store.db
        .selectFrom('webhook_events')
        .select(['sequence', 'payload'])
        .where('instance_id', '=', instance.id)
        .orderBy('sequence')
        .execute()
    ).map((row) => [Number(row.sequence), JSON.parse(row.payload).event.message.conversation]);

  /** Records `texts[i]` on instance i, all in one turn; → each record's outcome. */
  const recordAll = (texts: readonly string[][]) =>
    Promise.allSettled(
      texts.flatMap((each, index) =>
        each.map((text) =>
          t.services.recorder.record(
            (instances[index] as Instance).id,
            textMessage(text, { phone: `55119888800${index}` }),
          ),
        ),
      ),
    );

  it("takes three instances' numbers in one statement and writes their rows in one group", async () => {
    const outcomes = await recordAll([
      ['a1', 'a2'],
      ['b1', 'b2'],
      ['c1', 'c2'],
    ]);
    assert.deepEqual(
      outcomes.map((outcome) => outcome.status),
      Array(6).fill('fulfilled'),
    );
    assert.equal(
      statements.filter((sql) => ADVANCE_MANY.test(sql)).length,
      1,
      'one statement for the numbers',
    );
    assert.equal(statements.filter((sql) => ADVANCE_ONE.test(sql)).length, 0, 'no instance took its own');
    assert.equal(
      statements.filter((sql) => MESSAGE_GROUP.test(sql)).length,
      1,
      'one write group for the rows',
    );
    assert.deepEqual(await eventsOf(instances[0] as Instance), [
      [1, 'a1'],
      [2, 'a2'],
    ]);
    assert.deepEqual(await eventsOf(instances[1] as Instance), [
      [1, 'b1'],
      [2, 'b2'],
    ]);
    assert.deepEqual(await eventsOf(instances[2] as Instance), [
      [1, 'c1'],
      [2, 'c2'],
    ]);
  });

  it('a batch that fails after its numbers were taken fails alone and leaves no gap in its sequence', async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const before = await Promise.all([a, b, c].map((instance) => eventsOf(instance)));
    failFlush.add(b.id);
    const outcomes = await recordAll([['a3'], ['b3'], ['c3']]);
    assert.deepEqual(
      outcomes.map((outcome) => outcome.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    const rejected = outcomes[1];
    assert.ok(rejected?.status === 'rejected');
    assert.match(String(rejected.reason), new RegExp(`flush of ${b.id} failed`));
    assert.equal(
      statements.filter((sql) => ADVANCE_MANY.test(sql)).length,
      1,
      'the shared transaction took the numbers before it failed',
    );
    assert.ok(
      statements.filter((sql) => ADVANCE_ONE.test(sql)).length >= 2,
      'then each batch ran in a transaction of its own',
    );
    failFlush.clear();
    const next = await recordAll([[], ['b4'], []]);
    assert.deepEqual(
      next.map((outcome) => outcome.status),
      ['fulfilled'],
    );
    const after = await Promise.all([a, b, c].map((instance) => eventsOf(instance)));
    assert.deepEqual(after[0], [...(before[0] ?? []), [(before[0]?.length ?? 0) + 1, 'a3']]);
    assert.deepEqual(
      after[1],
      [...(before[1] ?? []), [(before[1]?.length ?? 0) + 1, 'b4']],
      'b3 left no number behind',
    );
    assert.deepEqual(after[2], [...(before[2] ?? []), [(before[2]?.length ?? 0) + 1, 'c3']]);
  });

  it("a shared commit whose answer was lost is asked about: every batch's events are kept once", async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const before = await Promise.all([a, b, c].map((instance) => eventsOf(instance)));
    commits?.arm(true);
    const outcomes = await recordAll([['a-lost'], ['b-lost'], ['c-lost']]);
    commits?.arm(false);
    assert.equal(commits?.lost(), 1, 'a shared commit answer was lost');
    assert.deepEqual(
      outcomes.map((outcome) => outcome.status),
      ['fulfilled', 'fulfilled', 'fulfilled'],
    );
    const after = await Promise.all([a, b, c].map((instance) => eventsOf(instance)));
    for (const [index, text] of ['a-lost', 'b-lost', 'c-lost'].entries()) {
      const earlier = before[index] ?? [];
      assert.deepEqual(
        after[index],
        [...earlier, [earlier.length + 1, text]],
        `instance ${index}: once, next in order`,
      );
    }
  });
});
