/**
 * A new send job's write whose answer is lost (docs/decisions/0011-store-faults.md): the store committed the row and
 * the connection dropped before the answer came back. The queue writes the job again and counts the row it finds as
 * stored, so the request goes on instead of failing a stored send (whose retry would send the message twice); while
 * the store stays away it waits. A write that never reached the store (no connection) answers 503 at once. The lost
 * answer is injected through the store's test-only `lostAnswers` hook on a second connection to the test store.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kysely, type KyselyPlugin, PostgresDialect } from 'kysely';
import pg from 'pg';
import { DomainError } from '../../src/domain/errors.ts';
import { extended } from '../../src/domain/objects.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import type { Store } from '../../src/store/database.ts';
import { faultAwareDialect } from '../../src/store/fault-aware-dialect.ts';
import { failedBeforeSending } from '../../src/store/faults.ts';
import type { Database } from '../../src/store/schema.ts';
import { claimNextSendJob } from '../../src/store/send-job-claims.ts';
import { findSendJob, insertSendJob, type SendJob, storeSendJobOnce } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import {
  fakeSession,
  storeGone,
  storeWithFaults,
  testQueue,
  textJob,
  untilRelayedAtOnce,
} from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

/** The new jobs' insert (the group's multi-row statement, or one row). */
const INSERT_JOBS = /^insert into "send_jobs"/;

/** The write again of a job whose answer was lost (`storeSendJobOnce`: insert unless there). */
const WRITE_AGAIN = /^insert into "send_jobs" .* on conflict/;

for (const dialect of testDialects()) {
  describe(`send queue: a new job's write whose answer is lost [${dialect}]`, () => {
    let t: TestApp;
    let store: Store;
    let queue: SendQueue;
    /** Answers of the jobs' insert still to lose (the statement is carried out, then fails). */
    let answersToLose = 0;
    /**
     * While set, every write again of a job whose answer was lost fails before it runs, as with the store away (the
     * connection reset); `refuse`, when set, is the error every new job's first write fails with instead.
     */
    let down = false;
    let refuse: Error | undefined;
    let refusedInserts = 0;
    /** When set, the store goes away (`down`) as the answer is lost. */
    let awayAfterLoss = false;
    const relayed: string[] = [];

    const rows = (ids: readonly string[]) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['id', 'status', 'attempts'])
        .where('id', 'in', ids)
        .orderBy('id')
        .execute();

    const session = fakeSession(async (message) => {
      relayed.push(message.id ?? '');
      return { id: message.id ?? '', timestamp: t.clock() };
    });

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const faults = (sql: string) => {
        if (down && WRITE_AGAIN.test(sql)) {
          refusedInserts += 1;
          throw storeGone();
        }
        if (refuse && INSERT_JOBS.test(sql) && !WRITE_AGAIN.test(sql)) throw refuse;
      };
      const lostAnswers = (sql: string) => {
        if (answersToLose > 0 && INSERT_JOBS.test(sql)) {
          answersToLose -= 1;
          if (awayAfterLoss) down = true;
          throw storeGone();
        }
      };
      store = await storeWithFaults(t, { faults, lostAnswers });
      queue = testQueue(t.clock, store.db, t.instance.id, session);
      queue.wake(t.instance.id);
    });
    after(async () => {
      await queue.stop();
      await store.destroy();
      await t.close();
    });

    it('a job stored alone whose answer was lost counts as stored: one row, relayed once', async () => {
      answersToLose = 1;
      const job = textJob(t.instance.id, '3EB0LOST00000000000001', 'sync', t.clock());
      const wait = await queue.storeSync(session, job);
      assert.equal(answersToLose, 0, 'the answer was lost');
      assert.equal((await wait()).id, job.id);
      assert.deepEqual(await rows([job.id]), [{ id: job.id, status: 'sent', attempts: 1 }]);
      assert.deepEqual(
        relayed.filter((id) => id === job.id),
        [job.id],
      );
    });

    it("a group's jobs whose answer was lost are each stored once and relayed once", async () => {
      answersToLose = 1;
      const ids = ['3EB0LOST00000000000002', '3EB0LOST00000000000003', '3EB0LOST00000000000004'];
      const jobs = ids.map((id) => textJob(t.instance.id, id, 'async', t.clock()));
      // Added in one turn: one statement for the three.
      await Promise.all(jobs.map((job) => queue.store(job)));
      assert.equal(answersToLose, 0, 'the answer was lost');
      queue.wake(t.instance.id);
      await eventually('the three relayed and marked sent', async () =>
        (await rows(ids)).every((row) => row.status === 'sent'),
      );
      assert.deepEqual(
        (await rows(ids)).map((row) => [row.id, row.status, row.attempts]),
        ids.map((id) => [id, 'sent', 1]),
      );
      assert.deepEqual(
        relayed.filter((id) => ids.includes(id)),
        ids,
        'each relayed once, in order',
      );
    });

    it('waits while the store stays away after a lost answer, then goes on', async () => {
      answersToLose = 1;
      awayAfterLoss = true;
      const job = textJob(t.instance.id, '3EB0LOST00000000000005', 'async', t.clock());
      const refusedBefore = refusedInserts;
      let settled = false;
      const stored = queue.store(job).finally(() => {
        settled = true;
      });
      // The store goes away as the answer is lost: the write again meets it away.
      await eventually('the answer lost', () => answersToLose === 0);
      await eventually(
        'the write tried again twice while the store is away',
        () => refusedInserts >= refusedBefore + 2,
      );
      assert.equal(settled, false, 'the request waits for the store');
      down = false;
      awayAfterLoss = false;
      await stored;
      assert.deepEqual(
        (await rows([job.id])).map((row) => row.id),
        [job.id],
      );
      queue.wake(t.instance.id);
      await eventually('relayed', () => relayed.includes(job.id));
      assert.deepEqual(
        relayed.filter((id) => id === job.id),
        [job.id],
      );
    });

    it('holds no later send behind a lost answer: a job accepted while the store is awaited is stored at once', async () => {
      answersToLose = 1;
      awayAfterLoss = true;
      const waiting = textJob(t.instance.id, '3EB0LOST00000000000008', 'async', t.clock());
      const refusedBefore = refusedInserts;
      const stored = queue.store(waiting);
      await eventually('the write again refused', () => refusedInserts > refusedBefore);
      const later = textJob(t.instance.id, '3EB0LOST00000000000009', 'async', t.clock());
      assert.equal(await queue.store(later), 'stored', 'stored while the first still waits');
      down = false;
      awayAfterLoss = false;
      // The first row was committed before its answer was lost, so a wake of the queue scheduled by an earlier case
      // may have claimed it meanwhile: the write again then finds it `moved`, its outcome the relay's. Either way the
      // job is stored once and relayed once.
      assert.ok(['stored', 'moved'].includes(await stored), 'the first job stored');
      assert.deepEqual(
        (await rows([waiting.id, later.id])).map((row) => row.id),
        [waiting.id, later.id],
      );
      queue.wake(t.instance.id);
      await eventually('both relayed and marked sent', async () =>
        (await rows([waiting.id, later.id])).every((row) => row.status === 'sent'),
      );
      assert.deepEqual(
        relayed.filter((id) => id === waiting.id || id === later.id),
        [waiting.id, later.id],
        'each relayed once, in order',
      );
    });

    it('a write the store refused with its outcome known answers 503 at once, every job of its group alike', async () => {
      refuse = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      try {
        const ids = ['3EB0LOST0000000000000A', '3EB0LOST0000000000000B'];
        const results = await Promise.allSettled(
          ids.map((id) => queue.store(textJob(t.instance.id, id, 'async', t.clock()))),
        );
        for (const result of results) {
          assert.equal(result.status, 'rejected');
          assert.ok(result.reason instanceof DomainError);
          assert.equal(result.reason.code, 'store_unavailable');
        }
        assert.deepEqual(await rows(ids), [], 'nothing stored');
      } finally {
        refuse = undefined;
      }
    });

    /**
     * A synchronous send whose job's answer is lost while the store goes away for longer than the sync wait: it
     * answers 504 unsent once the store is back, and its row is `failed` with `attempts` (1 when stored claimed
     * for a relay at once, 0 when waiting its turn); it is never relayed.
     */
    const storedAfterItsWait = async (id: string, attempts: number, instanceId = t.instance.id) => {
      answersToLose = 1;
      awayAfterLoss = true;
      const job = textJob(instanceId, id, 'sync', t.clock());
      const refusedBefore = refusedInserts;
      const answer = queue.storeSync(session, job);
      answer.catch(() => undefined);
      await eventually('the write again refused', () => refusedInserts > refusedBefore);
      t.clock.advance(61_000);
      down = false;
      awayAfterLoss = false;
      await assert.rejects(answer, (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.deepEqual(
          [error.code, error.message],
          ['timeout', 'the message could not be relayed within 60 s and was not sent'],
        );
        return true;
      });
      assert.deepEqual(await rows([job.id]), [{ id: job.id, status: 'failed', attempts }]);
      queue.wake(t.instance.id);
      assert.equal(relayed.includes(job.id), false, 'never relayed');
    };

    it('a synchronous send stored claimed after its 60 s wait passed (the store came back late) is failed unsent: 504', async () => {
      // Stored claimed only while the queue is idle: the drains of the cases before have ended.
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, '3EB0LOSTIDLE');
      await storedAfterItsWait('3EB0LOST0000000000000C', 1);
    });

    it('a synchronous send waiting its turn whose store answered after its 60 s wait is failed unsent: 504', async () => {
      // An instance this queue never drained (no session here): the send is stored pending, to wait its turn, and
      // no relay of this queue claims it while the store is away.
      const other = await t.newInstance('test', 'waiting');
      await storedAfterItsWait('3EB0LOST0000000000000D', 0, other.id);
    });

    it('storeSendJobOnce refuses a key held by another send', async () => {
      // Not due for an hour: no relay claims it meanwhile.
      const job = {
        ...textJob(t.instance.id, '3EB0LOST00000000000006', 'async', t.clock()),
        runAt: t.clock() + 3_600_000,
      };
      assert.equal(await storeSendJobOnce(store.db, job, t.clock()), 'stored');
      assert.equal(await storeSendJobOnce(store.db, job, t.clock()), 'found');
      await t.services.store.db
        .updateTable('send_jobs')
        .set({ status: 'canceled' })
        .where('id', '=', job.id)
        .execute();
      assert.equal(await storeSendJobOnce(store.db, job, t.clock()), 'moved', 'changed since it was written');
      const late = textJob(t.instance.id, '3EB0LOST0000000000000E', 'sync', t.clock());
      const failure = {
        at: t.clock(),
        error: 'the message could not be relayed within 60 s and was not sent',
      };
      assert.equal(
        await storeSendJobOnce(store.db, late, t.clock(), failure),
        'failed',
        'written failed when late',
      );
      assert.deepEqual(await rows([late.id]), [{ id: late.id, status: 'failed', attempts: 0 }]);
      const other = textJob(t.instance.id, job.id, 'async', t.clock());
      await assert.rejects(
        storeSendJobOnce(store.db, other, t.clock()),
        /is stored already for another send/,
      );
    });

    it('storeSendJobOnce leaves a late job to the relay that claimed it while its row was read', async () => {
      // Accepted two minutes ago: its write again comes past its sync wait and would store it failed unsent.
      const accepted = t.clock() - 120_000;
      const late = extended(textJob(t.instance.id, '3EB0LOST0000000000000F', 'sync', accepted), {
        runAt: accepted,
      });
      // The first write, whose answer was lost, committed the row.
      await insertSendJob(t.services.store.db, late);
      // A relay claims the job as the write again reads its row (the claim is the instance's first due job: the
      // earliest). On SQLite the write again holds the store's write lock from its insert on, so no claim can come
      // between: the claim comes after it there.
      let claimed: SendJob | undefined;
      let armed = true;
      const claim = () => claimNextSendJob(t.services.store.db, t.instance.id, 'relaying-node', t.clock());
      const claimAsRowIsRead: KyselyPlugin = {
        transformQuery: ({ node }) => node,
        async transformResult({ result }) {
          const row = result.rows[0];
          if (
            armed &&
            dialect === 'postgres' &&
            typeof row === 'object' &&
            row !== null &&
            'payload' in row
          ) {
            armed = false;
            claimed = await claim();
          }
          return result;
        },
      };
      const failure = {
        at: accepted + 60_000,
        error: 'the message could not be relayed within 60 s and was not sent',
      };
      const written = await storeSendJobOnce(store.db.withPlugin(claimAsRowIsRead), late, t.clock(), failure);
      if (dialect === 'postgres') {
        assert.equal(claimed?.id, late.id, 'claimed while the row was read');
        assert.equal(written, 'moved', "the relay's");
        const row = await findSendJob(t.services.store.db, t.instance.id, late.id);
        assert.deepEqual([row?.status, row?.lockedBy, row?.attempts], ['sending', 'relaying-node', 1]);
      } else {
        assert.equal(written, 'failed');
        assert.equal((await claim())?.id === late.id, false, 'failed unsent, never claimed after');
      }
      await t.services.store.db.deleteFrom('send_jobs').where('id', '=', late.id).execute();
    });
  });
}

describe('send queue: a new job whose write never reached the store', () => {
  it('answers store_unavailable at once when no connection can be had (PostgreSQL, a closed port)', async () => {
    const pool = new pg.Pool({ host: '127.0.0.1', port: 1, user: 'postgres', database: 'none' });
    const db = new Kysely<Database>({ dialect: faultAwareDialect(new PostgresDialect({ pool })) });
    const queue = testQueue(
      () => T0,
      db,
      'instance-without-store',
      fakeSession(async () => ({ id: '', timestamp: T0 })),
    );
    try {
      const job = textJob('instance-without-store', '3EB0LOST00000000000007', 'async', T0);
      await assert.rejects(queue.store(job), (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.equal(error.code, 'store_unavailable');
        assert.equal(failedBeforeSending(error), true, 'raised while connecting');
        return true;
      });
    } finally {
      await queue.stop();
      await db.destroy();
    }
  });
});
