/**
 * A send job's due times (`run_at`, a retry's `not_before`) are set and judged on the store's clock, the one every
 * node shares (docs/decisions/0112-send-due-times-on-the-store-clock.md; docs/decisions/0008-leases-and-fencing.md,
 * "One clock"), so a retry's backoff and a scheduled send's time are honoured whichever node relays it. Set and
 * judged on each node's own wall clock, a node whose clock ran ahead of the one that set a retry relayed it early
 * (the backoff cut short by the skew), one whose clock ran behind relayed it late, a scheduled send went out early
 * on a node ahead and late on one behind, and a send accepted on a node ahead waited out the skew before a node on
 * time relayed it. Two queues (two nodes' queues) share one store here, each built as the services build a node's:
 * due times on the node's own `StoreClock` over the store, every other time on its wall clock, which is off by a
 * minute. Both stores: on SQLite the two queues are two nodes' queues of one process, whose wall clocks still differ.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import pino from 'pino';
import { DomainError } from '../../src/domain/errors.ts';
import type { SentMessage } from '../../src/domain/messages.ts';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

/** The first retry's delay of a queued send, ms (src/sends/failures.ts: 1 s after the first attempt). */
const BACKOFF_MS = 1_000;
/** How far a node's wall clock is off, ms: far more than the backoff. */
const SKEW_MS = 60_000;
/**
 * How much sooner than due a relay may come, ms: each node's store clock is an estimate, off by up to half the round
 * trip of its last reading (longer on a loaded machine, where the process may wait between the reading and its
 * timing), while the relays are timed on this machine's clock. Far below the skew.
 */
const ESTIMATE_MS = 50;

for (const dialect of testDialects()) {
  describe(`send due times on the store's clock [${dialect}]`, () => {
    let t: TestApp;
    /** The time (this machine's clock, ms), job and node of each relay a node's session was asked for, refused or not. */
    const relays: { at: number; id: string; node: string }[] = [];
    let refuse: DomainError | undefined;
    const queues: SendQueue[] = [];

    /**
     * The send queue of a node (`name`) whose wall clock is `skewMs` off this machine's, as the services build it:
     * due times on its own store clock (synced with the store), everything else on its wall clock.
     */
    const node = async (name: string, skewMs: number): Promise<SendQueue> => {
      const wall = () => Date.now() + skewMs;
      const storeClock = new StoreClock({ db: t.services.store.db, logger: pino({ level: 'silent' }), wall });
      await storeClock.sync();
      const session = fakeSession(async (message): Promise<SentMessage> => {
        relays.push({ at: Date.now(), id: message.id ?? '', node: name });
        if (refuse) {
          const error = refuse;
          refuse = undefined;
          throw error;
        }
        return { id: message.id ?? '', timestamp: wall() };
      });
      const queue = testQueue(wall, t.services.store.db, t.instance.id, session, undefined, {
        nodeId: name,
        storeClock: () => storeClock.now(),
      });
      queues.push(queue);
      return queue;
    };
    const row = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'run_at', 'not_before', 'attempts', 'locked_by'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /** Relays job `id`'s first attempt on node `first`, which fails and sets its retry; `first` then stops. */
    const failOn = async (first: SendQueue, id: string): Promise<number> => {
      await insertSendJob(t.services.store.db, textJob(t.instance.id, id, 'async', Date.now()));
      refuse = new DomainError('platform_unreachable', 'the platform could not be reached');
      first.wake(t.instance.id);
      await eventually('the retry set', async () => {
        const held = await row(id);
        return held.status === 'pending' && held.attempts === 1 && Number(held.not_before) > 0;
      });
      await first.stop();
      const failed = relays.at(-1);
      assert.ok(failed !== undefined && failed.id === id, 'the first attempt was made');
      return failed.at;
    };

    before(async () => {
      t = await createTestApp({ dialect, sendDueOnStoreClock: true });
    });
    afterEach(async () => {
      for (const queue of queues.splice(0)) await queue.stop();
      relays.length = 0;
    });
    after(() => t.close());

    it("a node whose clock runs ahead relays a retry no sooner than its backoff, on the store's clock", async () => {
      const id = '3EB0DUECLOCK00000000A1';
      const onTime = await node('node-on-time', 0);
      const ahead = await node('node-ahead', SKEW_MS);
      const failedAt = await failOn(onTime, id);
      ahead.wake(t.instance.id);
      await eventually(
        'the retry relayed by the node ahead',
        async () => (await row(id)).status === 'sent',
        5_000,
      );
      const retry = relays.at(-1);
      assert.equal(relays.length, 2, 'two relays');
      assert.ok(retry !== undefined);
      assert.ok(
        retry.at - failedAt >= BACKOFF_MS - ESTIMATE_MS,
        `the retry came ${retry.at - failedAt} ms after the failed relay, before its ${BACKOFF_MS} ms backoff`,
      );
      assert.deepEqual(
        relays.map((relay) => relay.node),
        ['node-on-time', 'node-ahead'],
      );
      assert.equal((await row(id)).attempts, 2);
    });

    it('a node whose clock runs behind relays a retry once its backoff ran out, not a skew later', async () => {
      const id = '3EB0DUECLOCK00000000B1';
      const onTime = await node('node-on-time', 0);
      const behind = await node('node-behind', -SKEW_MS);
      const failedAt = await failOn(onTime, id);
      behind.wake(t.instance.id);
      // Judged on its wall clock the retry would be due a minute late: it is relayed as soon as the backoff ran out.
      await eventually(
        'the retry relayed by the node behind',
        async () => (await row(id)).status === 'sent',
        5_000,
      );
      const retry = relays.at(-1);
      assert.ok(retry !== undefined);
      assert.ok(
        retry.at - failedAt >= BACKOFF_MS - ESTIMATE_MS,
        `the retry came ${retry.at - failedAt} ms after ${JSON.stringify([relays, await row(id), failedAt])}`,
      );
      assert.deepEqual(
        relays.map((relay) => relay.node),
        ['node-on-time', 'node-behind'],
      );
      assert.equal((await row(id)).attempts, 2);
    });

    it("a scheduled send is relayed at its time on the store's clock by a node ahead and by one behind", async () => {
      const ahead = await node('node-ahead', SKEW_MS);
      const behind = await node('node-behind', -SKEW_MS);
      // The client asked for these absolute times (this machine's clock, as the store's): 1 s from now.
      const sendAt = Date.now() + BACKOFF_MS;
      const early = { ...textJob(t.instance.id, '3EB0DUECLOCK00000000C1', 'async', sendAt), sendAt };
      await insertSendJob(t.services.store.db, early);
      ahead.wake(t.instance.id);
      await eventually(
        'relayed by the node ahead',
        async () => (await row(early.id)).status === 'sent',
        5_000,
      );
      const [first] = relays;
      assert.ok(first !== undefined);
      assert.ok(first.at >= sendAt - ESTIMATE_MS, `relayed ${sendAt - first.at} ms before its time`);
      await ahead.stop();

      const later = Date.now() + BACKOFF_MS;
      const late = { ...textJob(t.instance.id, '3EB0DUECLOCK00000000C2', 'async', later), sendAt: later };
      await insertSendJob(t.services.store.db, late);
      behind.wake(t.instance.id);
      await eventually(
        'relayed by the node behind',
        async () => (await row(late.id)).status === 'sent',
        5_000,
      );
      const second = relays.at(-1);
      assert.ok(second !== undefined && second.id === late.id);
      assert.ok(second.at >= later - ESTIMATE_MS, `relayed ${later - second.at} ms before its time`);
    });

    it('a send accepted on a node whose clock runs ahead is due at once for a node on time', async () => {
      // The services (the node accepting the send) hold the session, relay nothing themselves (their queue stopped),
      // and run a minute ahead of this machine and of the store.
      await loginSandbox(t);
      await t.services.sendQueue.stop();
      t.clock.set(Date.now() + SKEW_MS);
      const res = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: '5511977776666', body: 'now' },
        { prefer: 'respond-async' },
      );
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const id: string = res.body.data.id;
      const stored = await row(id);
      assert.ok(
        Number(stored.run_at) <= Date.now() + ESTIMATE_MS,
        `due ${Number(stored.run_at) - Date.now()} ms from now: on the accepting node's wall clock`,
      );
      const onTime = await node('node-on-time', 0);
      onTime.wake(t.instance.id);
      await eventually(
        'relayed at once by the node on time',
        async () => (await row(id)).status === 'sent',
        2_000,
      );
    });
  });
}
