/**
 * A store that cannot be reached while a claimed send job's outcome is written (docs/decisions/0009-sends-as-jobs.md,
 * docs/decisions/0011-store-faults.md): the queue's relay waits the store out, holding the job, so the job is never
 * left `sending` after its request answered, and no login's hand-back gives it to a second relay. The outage is
 * injected through the store's test-only fault hook on a second connection to the test store.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import type { Store } from '../../src/store/database.ts';
import type { NewSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, storeGone, storeWithFaults, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`send queue: the store away while a job's outcome is written [${dialect}]`, () => {
    let t: TestApp;
    let store: Store;
    let queue: SendQueue;
    /**
     * While set, the statement that ends a held job (`finishSendJob`: its `set` starts with the lock's release)
     * fails as if the store were gone; the login's hand-back and the claims still pass.
     */
    let down = false;
    /** While set, the next end of a held job is written and its answer lost (the connection reset after it). */
    let loseFinish = false;
    let failedWrites = 0;
    /** Hand-backs of `sending` jobs run (`reclaimSendingJobs`). */
    let handBacks = 0;
    const relayed: string[] = [];
    let refuse: DomainError | undefined;
    /** Holds the relay of this job id until released. */
    let gate: { id: string; started: boolean; released: Promise<void> } | undefined;
    /**
     * The queue drain's last statement seen: a claim sent, or its look for the instance's first pending job answered
     * (src/sends/drain.ts: a pass that claims nothing looks, then ends; the queue is idle after a look unless something
     * woke it meanwhile, and then the next pass starts at once with its claim). `looks` counts the looks answered.
     */
    const drain = { last: 'claim' as 'claim' | 'look', looks: 0 };
    const syncJob = (id: string): NewSendJob => textJob(t.instance.id, id, 'sync', t.clock());
    const row = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'locked_by', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const login = () =>
      queue.afterCommit(t.instance.id, {
        type: 'connection',
        state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
      });
    /** A synchronous send relayed at once (stored claimed by the queue's fast path). */
    /**
     * A synchronous send through the queue's fast path when open; `stored` is `sending` only when the row was stored
     * claimed at once: the clock moves on 1 ms after the job's acceptance, so a claim by a drain running meanwhile
     * (its `locked_at` the claim's time) does not pass for one.
     */
    const relayAtOnce = async (id: string) => {
      const job = syncJob(id);
      t.clock.advance(1);
      const wait = await queue.storeSync(session, job);
      const stored = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'locked_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      const atOnce = stored.status === 'sending' && Number(stored.locked_at) === job.now;
      return { stored: atOnce ? 'sending' : `${stored.status} (not at once)`, outcome: wait() };
    };

    /**
     * Waits until a probe is relayed at once: the fast path opens once the queue drained with nothing due (a login
     * makes it forget that until its drain's next pass ends with nothing due, src/sends/runners.ts `afterLogin`).
     */
    let probeIds = 0;
    const untilRelayedAtOnce = async () => {
      // The fast path opens once the queue drained with nothing due. A probe sent before that waits its turn: the
      // drain relays it, and the queue is idle only once a pass after that ends with a look that finds nothing due,
      // no wake having come meanwhile (a pass that found the probe pending before its claim sets one). The next probe
      // waits for that instead of racing the passes the last one started.
      for (let probes = 1; ; probes += 1) {
        probeIds += 1;
        const probe = await relayAtOnce(`3EB0PROBE${String(probeIds).padStart(13, '0')}`);
        // The looks made before the answer (the pass that relayed a queued probe looks after it), read as it settles.
        let looksBefore = 0;
        await probe.outcome.finally(() => {
          looksBefore = drain.looks;
        });
        if (probe.stored === 'sending') break;
        assert.ok(probes < 10, `probe ${probes} relayed at once: the queue drained`);
        await eventually(
          'the drain idle after relaying a probe',
          () => drain.looks > looksBefore && drain.last === 'look',
        );
      }
    };

    const session = fakeSession(async (message) => {
      if (gate && gate.id === message.id && !gate.started) {
        gate.started = true;
        await gate.released;
      }
      relayed.push(message.id ?? '');
      if (refuse) throw refuse;
      return { id: message.id ?? '', timestamp: t.clock() };
    });

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const faults = (sql: string) => {
        if (/^update "send_jobs" set "status" = (\?|\$\d+), "attempts" = attempts \+ 1/.test(sql))
          drain.last = 'claim';
        if (
          /^update "send_jobs" set "status" = case when exists \(select 1 from messages m[^)]*\) then 'sent'\s/.test(
            sql,
          )
        )
          handBacks += 1;
        if (
          down &&
          /^update "send_jobs" set "locked_by" = (\?|\$\d+), "locked_at" = (\?|\$\d+), "updated_at" = (\?|\$\d+), "status"/.test(
            sql,
          )
        ) {
          failedWrites += 1;
          throw storeGone();
        }
      };
      const lostAnswers = (sql: string) => {
        if (/^select "run_at", "not_before" from "send_jobs"/.test(sql)) {
          drain.looks += 1;
          drain.last = 'look';
        }
        if (loseFinish && /^update "send_jobs" set "locked_by" = (\?|\$\d+), "locked_at"/.test(sql)) {
          loseFinish = false;
          throw storeGone();
        }
      };
      store = await storeWithFaults(t, { faults, lostAnswers });
      queue = testQueue(t.clock, store.db, t.instance.id, session);
      queue.wake(t.instance.id);
      await untilRelayedAtOnce();
      relayed.length = 0;
    });
    after(async () => {
      await queue.stop();
      await store.destroy();
      await t.close();
    });

    it('a refusal whose failure cannot be stored waits for the store, is relayed once and answers the refusal', async () => {
      refuse = new DomainError('platform_refused', 'the platform rejected the message (error 479)');
      down = true;
      const { stored, outcome } = await relayAtOnce('3EB0AAAAAAAAAAAAAAAAAA');
      assert.equal(stored, 'sending', 'stored claimed, relayed at once');
      let settled = false;
      void outcome.then(
        () => {
          settled = true;
        },
        () => {
          settled = true;
        },
      );
      await eventually('the failure written again after the store refused it', () => failedWrites >= 2);
      assert.equal(settled, false, 'the request waits while the outcome cannot be stored');
      // A login commits meanwhile (a reconnect): its hand-back must leave the job whose outcome is being written.
      const handBacksBefore = handBacks;
      login();
      await eventually('the hand-back run', () => handBacks > handBacksBefore);
      assert.equal((await row('3EB0AAAAAAAAAAAAAAAAAA')).status, 'sending', 'not handed back');
      await eventually('the failure written again after the hand-back', () => failedWrites >= 3);
      refuse = undefined;
      down = false;
      await assert.rejects(outcome, (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.equal(error.code, 'platform_refused', 'the platform answer, not the outage');
        return true;
      });
      const job = await row('3EB0AAAAAAAAAAAAAAAAAA');
      assert.deepEqual(
        [job.status, job.attempts, job.locked_by, job.last_error],
        ['failed', 1, null, 'the platform rejected the message (error 479)'],
      );
      // The queue goes on: the next send is relayed and the failed job is not relayed again.
      const next = await relayAtOnce('3EB0BBBBBBBBBBBBBBBBBB');
      assert.equal((await next.outcome).id, '3EB0BBBBBBBBBBBBBBBBBB');
      assert.deepEqual(
        relayed.filter((id) => id === '3EB0AAAAAAAAAAAAAAAAAA'),
        ['3EB0AAAAAAAAAAAAAAAAAA'],
        'relayed once',
      );
    });

    it("a refusal whose failed mark lost its answer answers the platform's refusal, not a conflict", async () => {
      refuse = new DomainError('platform_refused', 'the platform rejected the message (error 479)');
      loseFinish = true;
      const { outcome } = await relayAtOnce('3EB0EEEEEEEEEEEEEEEEEE');
      await assert.rejects(outcome, (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.deepEqual(
          [error.code, error.message],
          ['platform_refused', 'the platform rejected the message (error 479)'],
        );
        return true;
      });
      refuse = undefined;
      assert.equal(loseFinish, false, 'the answer was lost');
      const job = await row('3EB0EEEEEEEEEEEEEEEEEE');
      assert.deepEqual([job.status, job.locked_by], ['failed', null]);
    });

    it('an accepted send whose outcome cannot be stored waits for the store and is marked sent, relayed once', async () => {
      // The logins of the tests before made the queue forget it was idle: relayed at once only once it drained.
      await untilRelayedAtOnce();
      down = true;
      const writesBefore = failedWrites;
      const { outcome } = await relayAtOnce('3EB0CCCCCCCCCCCCCCCCCC');
      await eventually('the sent mark refused twice', () => failedWrites >= writesBefore + 2);
      const handBacksBefore = handBacks;
      login();
      await eventually('the hand-back run', () => handBacks > handBacksBefore);
      assert.equal((await row('3EB0CCCCCCCCCCCCCCCCCC')).status, 'sending', 'not handed back');
      down = false;
      assert.equal((await outcome).id, '3EB0CCCCCCCCCCCCCCCCCC');
      const job = await row('3EB0CCCCCCCCCCCCCCCCCC');
      assert.deepEqual([job.status, job.attempts, job.locked_by], ['sent', 1, null]);
      assert.deepEqual(
        relayed.filter((id) => id === '3EB0CCCCCCCCCCCCCCCCCC'),
        ['3EB0CCCCCCCCCCCCCCCCCC'],
        'relayed once',
      );
    });

    it('a login committed while the queue relays a job is handed back before its next claim', async () => {
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      gate = { id: '3EB0DDDDDDDDDDDDDDDDDD', started: false, released };
      // A paced queue relays nothing at once: the job goes through the queue's drain.
      await queue.setPacing(t.instance.id, { minIntervalMs: 1, jitterMs: 0, newChatsPerDay: null });
      // The pace counts from the last relay.
      t.clock.advance(1);
      const wait = await queue.storeSync(session, syncJob('3EB0DDDDDDDDDDDDDDDDDD'));
      const outcome = wait();
      await eventually('the drain relaying', () => gate?.started);
      const handBacksBefore = handBacks;
      login();
      release();
      assert.equal((await outcome).id, '3EB0DDDDDDDDDDDDDDDDDD');
      await eventually('the hand-back run by the same drain', () => handBacks > handBacksBefore);
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null });
    });
  });
}
