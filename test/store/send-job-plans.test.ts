import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import {
  claimNextSendJob,
  countDueSendJobs,
  firstPendingJob,
  instancesWithDueJobs,
  reclaimSendingJobs,
} from '../../src/store/send-job-claims.ts';
import { markSendJobsSent } from '../../src/store/send-job-marks.ts';
import { releaseSlotWaiters, SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { insertSendJobs, type NewSendJob } from '../../src/store/send-jobs.ts';
import { countNewChatsSince, oldestNewChatSince } from '../../src/store/send-pacing.ts';
import { openTracedStore, planOf, type TracedStore } from '../support/plans.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`send jobs' statements use the live-jobs indexes (docs/decisions/0060-live-send-job-index.md) [${dialect}]`, () => {
    let testStore: TestStore;
    let traced: TracedStore;

    before(async () => {
      testStore = await createTestStore(dialect);
      traced = await openTracedStore(testStore);
    });
    after(async () => {
      await traced.store.destroy();
      await testStore.cleanup();
    });

    /** Runs `call` and returns the text of the one statement on `send_jobs` it ran. */
    async function statementOf(call: () => Promise<unknown>): Promise<string> {
      const mine = await traced.statementsOf(call, 'send_jobs');
      assert.equal(mine.length, 1, mine.join('\n'));
      return mine[0] ?? '';
    }

    it('the claim, in either form, and the first pending job read send_jobs_due', async () => {
      const db = traced.store.db;
      const texts = [
        await statementOf(() => claimNextSendJob(db, 'i-1', 'node-1', 1_000)),
        await statementOf(() => claimNextSendJob(db, 'i-1', 'node-1', 1_000, { mode: 'async' })),
        await statementOf(() => firstPendingJob(db, 'i-1')),
      ];
      for (const text of texts) {
        assert.match(text, /'pending'/, 'the status is written into the text');
        const plan = await planOf(testStore.store.db, dialect, text);
        assert.match(plan, /send_jobs_due/, plan);
      }
    });

    it('the sweep for instances with due jobs reads send_jobs_due, not every kept job', async () => {
      const text = await statementOf(() => instancesWithDueJobs(traced.store.db, 1_000));
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.match(plan, /send_jobs_due/, plan);
    });

    it("the status's count of due sends reads send_jobs_due, its statuses written into the text", async () => {
      const text = await statementOf(() => countDueSendJobs(traced.store.db, 'i-1', 1_000));
      assert.match(text, /'pending'/);
      assert.match(text, /'sending'/);
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.match(plan, /send_jobs_due/, plan);
    });

    it('the count of due sends counts pending and sending jobs whose time came, and nothing else', async () => {
      const db = traced.store.db;
      const org = await adminCreateOrg(db, { name: 'due', plan: 'pro' });
      const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'd' });
      const job = (n: number, runAt: number): NewSendJob => ({
        instanceId: instance.id,
        id: `3EB0DUECOUNT000000000${n}`,
        seq: n,
        chat: '15550001111@s.whatsapp.net',
        kind: 'text',
        payload: '{"body":"hi"}',
        mode: 'async',
        runAt,
        sendAt: null,
        maxAttempts: 25,
        now: 5,
      });
      await insertSendJobs(db, [job(1, 10), job(2, 20), job(3, 5_000)]);
      assert.equal(await countDueSendJobs(db, instance.id, 1_000), 2, 'two due, one scheduled later');
      assert.ok(await claimNextSendJob(db, instance.id, 'node-1', 1_000));
      assert.equal(await countDueSendJobs(db, instance.id, 1_000), 2, 'the one being relayed still counts');
      assert.equal(await countDueSendJobs(db, instance.id, 5_000), 3, 'the scheduled one counts once due');
      assert.equal(await countDueSendJobs(db, 'another', 5_000), 0);
    });

    it("the reclaim of unconfirmed relays reads send_jobs_due, and each job's message by its key", async () => {
      const text = await statementOf(() => reclaimSendingJobs(traced.store.db, 'i-1', 1_000));
      assert.match(text, /'sending'/);
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.match(plan, /send_jobs_due/, plan);
      // Each job's message looked up in an index (on an empty table PostgreSQL may pick either index led by the
      // instance; its primary key once the table has rows), never the table read whole.
      assert.match(
        plan,
        dialect === 'sqlite' ? /SEARCH m USING/ : /Index (Only )?Scan using \w+ on messages/,
        plan,
      );
      assert.doesNotMatch(plan, dialect === 'sqlite' ? /SCAN m\b/ : /Seq Scan on messages/, plan);
    });

    /**
     * Asserts that `plan` reads the pair kept for a job's LID (the user a slot is counted for,
     * src/store/send-pacing.ts `jobChatUser`) through an index of `lid_mappings`, never the table whole.
     */
    function lidPairsByKey(plan: string): void {
      assert.match(
        plan,
        dialect === 'sqlite'
          ? /SEARCH l USING INDEX \w+lid_mappings\w* \(instance_id=\? AND lid=\?\)/
          : /Index \w*\s?Scan using \w+ on lid_mappings/,
        plan,
      );
      assert.doesNotMatch(plan, dialect === 'sqlite' ? /SCAN l\b/ : /Seq Scan on lid_mappings/, plan);
    }

    it('the release of the sends waiting for a new-chat slot reads the waiting sends through send_jobs_due, pairs by key', async () => {
      const db = traced.store.db;
      const org = await adminCreateOrg(db, { name: 'slots', plan: 'pro' });
      const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: 's' });
      const waiting: NewSendJob = {
        instanceId: instance.id,
        id: '3EB0SLOTPLAN0000000001',
        seq: 1,
        chat: '15550001111@s.whatsapp.net',
        kind: 'text',
        payload: '{"body":"hi"}',
        mode: 'async',
        runAt: SLOT_WAIT + 5,
        sendAt: null,
        maxAttempts: 25,
        now: 5,
      };
      await insertSendJobs(db, [waiting]);
      // With a limit: one statement, the first chats' waiting sends, each read through send_jobs_due.
      const first = await statementOf(() => releaseSlotWaiters(db, instance.id, 1_000, 2));
      assert.match(first, /'pending'/, 'the status is written into the text');
      const plan = await planOf(testStore.store.db, dialect, first);
      assert.match(plan, /send_jobs_due/, plan);
      lidPairsByKey(plan);
      assert.doesNotMatch(
        plan,
        dialect === 'sqlite' ? /SCAN (send_jobs|w|e)\b/ : /Seq Scan on send_jobs/,
        plan,
      );
      // Without one (no cap): every waiting send, through send_jobs_due.
      const all = await statementOf(() => releaseSlotWaiters(db, instance.id, 1_000));
      assert.match(all, /'pending'/);
      assert.match(await planOf(testStore.store.db, dialect, all), /send_jobs_due/);
    });

    it("the new-chats-per-day counts read send_jobs_new_chats, and a LID job's pair by its key", async () => {
      for (const call of [
        () => countNewChatsSince(traced.store.db, 'i-1', 0),
        // Up to the cap, as the checks ask it.
        () => countNewChatsSince(traced.store.db, 'i-1', 0, 5),
        () => oldestNewChatSince(traced.store.db, 'i-1', 0),
      ]) {
        const text = await statementOf(call);
        const plan = await planOf(testStore.store.db, dialect, text);
        assert.match(plan, /send_jobs_new_chats/, plan);
        lidPairsByKey(plan);
      }
    });

    it('stores a group of new jobs and marks jobs sent in one statement each, on PostgreSQL one text whatever the count', async () => {
      const db = traced.store.db;
      const org = await adminCreateOrg(db, { name: 'groups', plan: 'pro' });
      const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'g' });
      const job = (id: string): NewSendJob => ({
        instanceId: instance.id,
        id,
        seq: Number(id.slice(1)),
        chat: '15550001111@s.whatsapp.net',
        kind: 'text',
        payload: '{"body":"hi"}',
        mode: 'sync',
        runAt: 1_000,
        sendAt: null,
        maxAttempts: 3,
        now: 1_000,
        claimedBy: 'node-1',
      });
      const inserts: string[] = [];
      const marks: string[] = [];
      let next = 1;
      for (const count of [1, 3, 50]) {
        const ids = Array.from({ length: count }, () => `j${next++}`);
        inserts.push(await statementOf(() => insertSendJobs(db, ids.map(job))));
        const marked = new Map<string, string>();
        marks.push(
          await statementOf(async () => {
            for (const [id, { mode }] of await markSendJobsSent(db, instance.id, ids, 2_000))
              marked.set(id, mode);
          }),
        );
        assert.deepEqual([...marked.keys()].sort(), [...ids].sort());
        assert.deepEqual(new Set(marked.values()), new Set(['sync']));
      }
      const rows = await db
        .selectFrom('send_jobs')
        .select(['status', 'sent_at', 'locked_by', 'payload'])
        .where('instance_id', '=', instance.id)
        .execute();
      assert.equal(rows.length, 54);
      assert.deepEqual(
        new Set(rows.map((row) => JSON.stringify(row))),
        new Set([JSON.stringify({ status: 'sent', sent_at: 2_000, locked_by: null, payload: '' })]),
      );
      if (dialect === 'postgres') {
        assert.equal(new Set(inserts).size, 1, inserts.join('\n'));
        assert.equal(new Set(marks).size, 1, marks.join('\n'));
      }
    });

    it('a status bound as a parameter could not use the index (what the literals are for)', async () => {
      const text =
        dialect === 'sqlite'
          ? 'select min("run_at") from "send_jobs" where "instance_id" = ? and "status" = ?'
          : 'select min("run_at") from "send_jobs" where "instance_id" = $1 and "status" = $2';
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.doesNotMatch(plan, /send_jobs_due/, plan);
    });
  });
}
