import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { setImmediate as yieldToQueue } from 'node:timers/promises';
import { releaseClaims } from '../../src/store/deliveries.ts';
import { ABANDONED, ATTEMPTS_ABANDONED, claimDeliveries } from '../../src/store/delivery-claims.ts';
import { type AttemptOutcome, finishAttempt } from '../../src/store/delivery-finish.ts';
import { removeDeadNodes } from '../../src/store/nodes.ts';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { pauseAfterRows } from '../support/query-hooks.ts';
import { testDialects } from '../support/store.ts';
import {
  bodies,
  configureWebhook,
  createWebhookApp,
  deliveries,
  dueNow,
  letTimePass,
  recordMessages,
  textMessage,
} from './support.ts';

/**
 * The outbox on Graphile Worker's model (docs/decisions/0005-outbox-and-delivery.md): `attempts` counted when a
 * delivery is claimed, a delivery whose attempts keep dying bounded by `max_attempts`, a claim whose URL is gone
 * given back at once, a worker that applies results only to its own claims, and `sequence` order per instance
 * throughout. With `WEBHOOK_RETRY_SCHEDULE=1` a round has 2 attempts.
 */

/**
 * Pauses once, right after the claiming statement (an UPDATE … RETURNING event_id, attempts, max_attempts)
 * returned its rows and before the claimed rows are read.
 */
const afterClaimStatement = () =>
  pauseAfterRows(
    (first) =>
      Object.keys(first).sort().join() === 'attempts,endpoint_id,event_id,instance_id,max_attempts,sequence',
  );

for (const dialect of testDialects()) {
  describe(`outbox claims on Graphile Worker's model (${dialect})`, () => {
    let receiver: Receiver;
    let t: TestApp;
    beforeEach(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({
        dialect,
        env: { WEBHOOK_RETRY_SCHEDULE: '1' },
        // One delivery per claim: these tests step through the queue one attempt at a time (batches: lane-batches.test.ts).
        webhookWorker: { start: false, laneBatch: 1 },
      });
      await configureWebhook(t, receiver.url);
    });
    afterEach(async () => {
      await t.close();
      await receiver.close();
    });
    const db = () => t.testStore.store.db;
    /** The worker's stale-claim timeout, ms. */
    const staleMs = () => t.clock() - t.services.webhooks.staleBefore(t.clock());
    /**
     * Claims as worker `workerId`, `ago` ms ago on the store's clock (claims are stamped and judged stale on it,
     * docs/decisions/0008-leases-and-fencing.md, "One clock"): a claim made longer ago than the stale timeout is one a
     * dead worker left.
     */
    const claim = (workerId: string, limit = 10, ago = 0) => {
      const lockedAt = t.services.storeClock.now() - ago;
      return claimDeliveries(db(), dialect, {
        workerId,
        now: t.clock(),
        // Due times are judged on the store's clock now (docs/decisions/0005-outbox-and-delivery.md, "Due times").
        dueAt: dueNow(t),
        lockedAt,
        staleBefore: t.services.webhooks.staleBefore(lockedAt),
        limit,
      });
    };
    const row = (eventId: string) =>
      db()
        .selectFrom('webhook_deliveries')
        .select(['status', 'attempts', 'max_attempts', 'locked_by', 'locked_at', 'last_error'])
        .where('event_id', '=', eventId)
        .executeTakeFirstOrThrow();
    const attemptRows = (eventId: string) =>
      db()
        .selectFrom('webhook_attempts')
        .select(['number', 'worker', 'error', 'status_code'])
        .where('event_id', '=', eventId)
        .orderBy('number')
        .execute();

    it('counts an attempt when it is claimed: one its dead worker never finished uses up one of max_attempts', async () => {
      receiver.respondWith(() => ({ status: 500, body: 'down' }));
      await recordMessages(t, 1);
      const [dead] = await claim('dead-node');
      assert.ok(dead);
      assert.deepEqual([dead.attempts, dead.maxAttempts], [1, 2], 'the claimed attempt is attempt 1 of 2');
      assert.deepEqual(await row(dead.eventId), {
        status: 'pending',
        attempts: 1,
        max_attempts: 2,
        locked_by: 'dead-node',
        locked_at: dead.lockedAt,
        last_error: null,
      });
      // The node registry finds the node dead and releases its claim: the attempt stays counted.
      assert.equal(await removeDeadNodes(db(), ['dead-node']), 1);
      assert.deepEqual([(await row(dead.eventId)).attempts, (await row(dead.eventId)).locked_by], [1, null]);

      assert.equal(await t.services.webhooks.runOnce(), 1);
      // Attempt 2 of 2 failed: no retry is left, although only one attempt ever got an answer.
      assert.deepEqual(await row(dead.eventId), {
        status: 'failed',
        attempts: 2,
        max_attempts: 2,
        locked_by: null,
        locked_at: null,
        last_error: 'receiver answered 500',
      });
      assert.deepEqual(await attemptRows(dead.eventId), [
        { number: 1, worker: 'dead-node', error: ABANDONED, status_code: null },
        { number: 2, worker: t.services.webhooks.id, error: 'receiver answered 500', status_code: 500 },
      ]);
      const [entry] = (await deliveries(t)).body.data.deliveries;
      assert.deepEqual(
        [entry.status, entry.nextAttemptAt, entry.lastError, entry.attempts.length],
        ['failed', null, 'receiver answered 500', 2],
      );
      assert.equal(receiver.requests.length, 1);
      assert.equal(await t.services.webhooks.runOnce(), 0, 'nothing more is attempted');
    });

    it('a delivery whose attempts keep dying ends failed after max_attempts; the next event follows in the same claim', async () => {
      await recordMessages(t, 3);
      // Two workers in turn claim the head and die mid-attempt; each claim goes stale and is taken over.
      for (const [index, worker] of ['crash-1', 'crash-2'].entries()) {
        const claimed = await claim(worker, 10, (2 - index) * (staleMs() + 1));
        assert.deepEqual(
          claimed.map((c) => [c.sequence, c.attempts]),
          [[1, index + 1]],
        );
      }
      assert.equal(
        await t.services.webhooks.runOnce(),
        1,
        'event 2 is claimed in place of the exhausted one',
      );
      assert.equal(await t.services.webhooks.runOnce(), 1);
      assert.equal(await t.services.webhooks.runOnce(), 0);
      assert.deepEqual(
        bodies(receiver.requests).map((b) => b.sequence),
        [2, 3],
        'the exhausted event is not posted a third time; order is kept',
      );
      const entries = (await deliveries(t)).body.data.deliveries;
      const first = entries.find((e: any) => e.sequence === 1);
      assert.deepEqual(
        {
          status: first.status,
          nextAttemptAt: first.nextAttemptAt,
          lastError: first.lastError,
          attempts: first.attempts.map((a: any) => [a.number, a.error, a.finishedAt !== null]),
        },
        {
          status: 'failed',
          nextAttemptAt: null,
          lastError: ATTEMPTS_ABANDONED,
          attempts: [
            [1, ABANDONED, true],
            [2, ABANDONED, true],
          ],
        },
      );
      const exhausted = await row(first.id);
      assert.deepEqual([exhausted.attempts, exhausted.locked_by, exhausted.locked_at], [2, null, null]);
      assert.deepEqual(
        entries.map((e: any) => [e.sequence, e.status]),
        [
          [3, 'delivered'],
          [2, 'delivered'],
          [1, 'failed'],
        ],
      );

      // Kept, and a redelivery starts a new round of two attempts.
      const redeliver = await t.call('POST', `/v1/webhook/deliveries/${first.id}/redeliver`);
      assert.equal(redeliver.status, 200, JSON.stringify(redeliver.body));
      assert.equal(await t.services.webhooks.runOnce(), 1);
      assert.deepEqual(await row(first.id), {
        status: 'delivered',
        attempts: 1,
        max_attempts: 2,
        locked_by: null,
        locked_at: null,
        last_error: null,
      });
      assert.deepEqual(
        (await attemptRows(first.id)).map((a) => [a.number, a.status_code]),
        [
          [1, null],
          [2, null],
          [3, 200],
        ],
      );
    });

    it('a claim that finds its URL removed gives the delivery back at once; the next claim proceeds', async () => {
      await recordMessages(t, 2);
      const [eventId] = (
        await db().selectFrom('webhook_events').select('id').orderBy('sequence').execute()
      ).map((r) => r.id);
      assert.ok(eventId);
      const hook = afterClaimStatement();
      const hooked = db().withPlugin(hook.plugin);
      let removal: Promise<unknown> | undefined;
      hook.arm(async () => {
        // DELETE /v1/webhook's write, from another connection, between the claiming statement and the read.
        removal = db()
          .updateTable('instances')
          .set({ webhook_url: null })
          .where('id', '=', t.instance.id)
          .execute();
        // PostgreSQL (READ COMMITTED): it commits at once and the claim's next read sees it. SQLite has one
        // writer: the removal queues behind the claim's transaction, so the claim reads the URL it locked with.
        if (dialect === 'postgres') await removal;
        else await yieldToQueue();
      });
      const now = t.clock();
      const claimed = await claimDeliveries(hooked, dialect, {
        workerId: 'w1',
        now,
        dueAt: dueNow(t),
        staleBefore: t.services.webhooks.staleBefore(now),
        limit: 10,
      });
      assert.ok(removal, 'the URL was removed during the claim');
      await removal;
      if (dialect === 'postgres') {
        assert.deepEqual(claimed, [], 'nothing to attempt without a URL');
        assert.deepEqual(
          await row(eventId),
          {
            status: 'pending',
            attempts: 0,
            max_attempts: 2,
            locked_by: null,
            locked_at: null,
            last_error: null,
          },
          'unlocked at once and not counted',
        );
        assert.deepEqual(await attemptRows(eventId), [], 'no attempt was logged');
      } else {
        assert.deepEqual(
          claimed.map((c) => [c.eventId, c.url, c.attempts]),
          [[eventId, receiver.url, 1]],
          'the claim is whole: it holds the URL it was made with',
        );
        // Its attempt is given back at shutdown (or finishes); either way the row is not left locked.
        assert.equal(await releaseClaims(db(), 'w1'), 1);
      }
      const config = await t.call('GET', '/v1/webhook');
      assert.equal(config.body.data.webhook, '');
      assert.equal(await claim('w2').then((c) => c.length), 0, 'no URL: nothing is claimed, nothing locked');

      // The URL is set again: the instance's queue goes on at once, without waiting for a stale timeout.
      await configureWebhook(t, receiver.url);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      assert.deepEqual(
        bodies(receiver.requests).map((b) => b.sequence),
        [1, 2],
      );
      assert.equal((await row(eventId)).status, 'delivered');
    });

    it('a worker whose claim was taken over cannot complete, fail or release the new owner’s claim', async () => {
      await recordMessages(t, 1);
      // The slow worker's claim was made longer ago than the stale timeout.
      const [old] = await claim('slow-worker', 10, staleMs() + 1);
      assert.ok(old);
      const [taken] = await claim('new-owner');
      assert.ok(taken);
      assert.deepEqual([taken.eventId, taken.attempts], [old.eventId, 2]);
      const finish = (workerId: string, lockedAt: number, attemptId: string, outcome: AttemptOutcome) =>
        finishAttempt(db(), {
          eventId: old.eventId,
          instanceId: old.instanceId,
          attemptId,
          workerId,
          lockedAt,
          attempt: {
            statusCode: outcome.kind === 'delivered' ? 200 : 410,
            durationMs: 3,
            error: outcome.kind === 'delivered' ? null : `late ${outcome.kind}`,
            responseBody: null,
            responseTruncated: false,
          },
          outcome,
          now: new Date(t.clock()).toISOString(),
        });
      const outcomes: AttemptOutcome[] = [
        { kind: 'delivered' },
        { kind: 'retry', runAt: t.clock() + 60_000 },
        { kind: 'failed' },
        {
          kind: 'gone',
          reason: 'receiver answered 410 Gone',
          url: 'https://example.com/hook',
          urlSealed: null,
        },
      ];
      for (const outcome of outcomes) {
        assert.equal(await finish('slow-worker', old.lockedAt, old.attemptId, outcome), false, outcome.kind);
      }
      assert.equal(await releaseClaims(db(), 'slow-worker'), 0, 'it releases only its own claims');
      // The new owner's id with the old claim's time (its own earlier claim, given back and claimed again: that claim's
      // attempt was another row, here the abandoned one).
      assert.equal(await finish('new-owner', old.lockedAt, old.attemptId, { kind: 'failed' }), false);
      assert.deepEqual(await row(old.eventId), {
        status: 'pending',
        attempts: 2,
        max_attempts: 2,
        locked_by: 'new-owner',
        locked_at: taken.lockedAt,
        last_error: null,
      });
      const state = await db().selectFrom('webhook_state').select('disabled_at').executeTakeFirstOrThrow();
      assert.equal(state.disabled_at, null, 'the late 410 did not disable the webhook');

      assert.equal(await finish('new-owner', taken.lockedAt, taken.attemptId, { kind: 'delivered' }), true);
      assert.equal((await row(old.eventId)).status, 'delivered');
      assert.deepEqual(
        (await attemptRows(old.eventId)).map((a) => [a.number, a.worker, a.status_code]),
        [
          [1, 'slow-worker', null],
          [2, 'new-owner', 200],
        ],
        'the taken-over attempt stays abandoned (docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md); the new owner’s holds its result',
      );
    });

    it('starts each instance’s deliveries in sequence order, one at a time, across a failure and its retry', async () => {
      const other = await t.newInstance('test', 'second');
      const set = await t.call('POST', `/v1/webhook?from=${other.id}`, { webhookUrl: receiver.url });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      const busy = new Set<string>();
      const overlaps: string[] = [];
      let failedOnce = false;
      receiver.respondWith(async (request) => {
        const body = JSON.parse(request.body.toString('utf8'));
        if (busy.has(body.instanceId)) overlaps.push(`${body.instanceId}#${body.sequence}`);
        busy.add(body.instanceId);
        // Hold the answer a little, so a second claim of the same instance would overlap it.
        await new Promise((resolve) => setTimeout(resolve, 15));
        busy.delete(body.instanceId);
        if (body.instanceId === t.instance.id && body.sequence === 2 && !failedOnce) {
          failedOnce = true;
          return { status: 500 };
        }
        return { status: 200 };
      });
      for (let i = 1; i <= 4; i++) {
        await t.services.recorder.record(t.instance.id, textMessage(`a${i}`));
        await t.services.recorder.record(other.id, textMessage(`b${i}`));
      }
      t.services.webhooks.start();
      await receiver.waitFor(
        (requests) => requests.filter((r) => r.reply.state === 'completed').length >= 8,
        15_000,
      );
      await letTimePass(t, 1_200);
      t.services.webhooks.wake();
      await receiver.waitFor(
        (requests) => requests.filter((r) => r.reply.state === 'completed').length >= 9,
        15_000,
      );
      await t.services.webhooks.stop();
      const started = (instanceId: string) =>
        bodies(receiver.requests)
          .filter((b) => b.instanceId === instanceId)
          .map((b) => b.sequence);
      assert.deepEqual(started(t.instance.id), [1, 2, 3, 4, 2], 'the failed event does not block later ones');
      assert.deepEqual(started(other.id), [1, 2, 3, 4]);
      assert.deepEqual(overlaps, [], 'never two deliveries of one instance in flight');
      const statuses = await db()
        .selectFrom('webhook_deliveries')
        .select(['status', 'attempts'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        statuses.map((s) => [s.status, s.attempts]),
        [
          ['delivered', 1],
          ['delivered', 2],
          ['delivered', 1],
          ['delivered', 1],
        ],
      );
    });
  });
}
