import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/store/schema.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import {
  type Child,
  childEnv,
  deliveredIds,
  deliveryRows,
  gate,
  newSecretKey,
  prepare,
  seed,
  startChild,
  until,
} from './child.ts';

/**
 * Crash safety (docs/decisions/0005-outbox-and-delivery.md): the real service runs in child processes that are
 * SIGKILLed while events are queued and while a delivery is in flight (the receiver holds its answer); after a
 * restart every recorded event reaches the receiver at least once. Runs on SQLite (restarts of one process) and
 * PostgreSQL (also two processes sharing the queue, one of them killed).
 */

/**
 * Waits until every event in the store that has a delivery was answered 200 by the receiver and is `delivered` in
 * the store. The events without one are the sessions' SessionStatus events (not subscribed, or recorded before
 * the URL was set); every event has its row, numbered without a gap.
 */
async function everyEventDelivered(db: Kysely<Database>, receiver: Receiver, expected: number) {
  const recorded = await db
    .selectFrom('webhook_events')
    .select(['id', 'instance_id', 'sequence', 'type', 'skip_reason'])
    .orderBy('instance_id')
    .orderBy('sequence')
    .execute();
  for (const instanceId of new Set(recorded.map((event) => event.instance_id))) {
    const rows = recorded.filter((event) => event.instance_id === instanceId);
    assert.deepEqual(
      rows.map((event) => Number(event.sequence)),
      rows.map((_, i) => i + 1),
    );
  }
  assert.deepEqual(
    [...new Set(recorded.filter((event) => event.skip_reason !== null).map((event) => event.type))],
    ['SessionStatus'],
  );
  const events = recorded.filter((event) => event.skip_reason === null);
  assert.equal(events.length, expected, 'every recorded event has its row');
  await until(
    async () => {
      const got = deliveredIds(receiver.requests);
      return events.every((event) => (got.get(event.id) ?? 0) >= 1);
    },
    60_000,
    `receiver got every one of the ${expected} events`,
  );
  await until(
    async () => (await deliveryRows(db)).every((row) => row.status === 'delivered'),
    30_000,
    'every delivery row is delivered',
  );
  const got = deliveredIds(receiver.requests);
  const duplicates = [...got.values()].filter((count) => count > 1).length;
  return { events, got, duplicates };
}

async function withStore(dialect: 'sqlite' | 'postgres', run: (store: TestStore) => Promise<void>) {
  const testStore = await createTestStore(dialect);
  try {
    await run(testStore);
  } finally {
    await testStore.cleanup();
  }
}

for (const dialect of testDialects()) {
  describe(`webhook crash safety with SIGKILL (${dialect})`, () => {
    it('after SIGKILL with events queued and a delivery in flight, a restart delivers every event', async () => {
      await withStore(dialect, async (testStore) => {
        const db = testStore.store.db;
        // The killed processes' claims are released when the next one boots on this host (the node registry), not
        // by the stale timeout: a long one keeps a slow attempt of the last process, on a loaded machine, from being
        // taken over as if its worker had died (which would add an abandoned attempt of its own).
        // One request of the lane at a time (`WEBHOOK_LANE_WINDOW=1`): exactly the head is in flight when killed;
        // the test below kills a window of four.
        const env = {
          ...childEnv(testStore, newSecretKey()),
          CHILD_STALE_MS: '20000',
          WEBHOOK_LANE_WINDOW: '1',
        };
        const {
          instances: [instance],
          key,
        } = await seed(testStore, 1);
        assert.ok(instance);
        const replies = gate();
        const receiver = await startReceiver({ respond: replies.respond });
        const children: Child[] = [];
        try {
          // Round 1: the scan's HistorySync in flight (held by the receiver), 20 messages queued, SIGKILL.
          const first = await startChild(env, 'crash-1');
          children.push(first);
          await prepare(first, key, instance.id, receiver.url, '5511999990001');
          await first.inbound(key, instance.id, 20, 'a');
          await receiver.waitForCount(1, 10_000);
          let rows = await deliveryRows(db);
          assert.equal(rows.length, 21);
          assert.ok(rows.every((row) => row.status === 'pending'));
          assert.deepEqual(
            rows.filter((row) => row.locked_by !== null).map((row) => [row.sequence, row.locked_by]),
            [[3, 'crash-1']],
            'exactly the first event is in flight (1 and 2: the SessionStatus qr and connected, not sent)',
          );
          await first.kill();
          await receiver.waitFor((requests) => requests[0]?.reply.state === 'aborted', 10_000);

          // Round 2: restart (the session is restored), 10 more messages; five answers go through, the next one
          // is held, SIGKILL again.
          replies.allow(5);
          const second = await startChild(env, 'crash-2');
          children.push(second);
          await second.inbound(key, instance.id, 10, 'b');
          await receiver.waitFor(
            (requests) =>
              requests.filter((r) => r.reply.state === 'completed').length >= 5 && requests.length >= 7,
            30_000,
          );
          rows = await deliveryRows(db);
          assert.equal(rows.length, 31);
          assert.ok(
            rows.some((row) => row.locked_by === 'crash-2' && row.status === 'pending'),
            'one in flight',
          );
          assert.ok(
            rows.some((row) => row.status === 'pending' && row.locked_by === null),
            'others queued',
          );
          await second.kill();

          // Round 3: restart with the receiver answering everything.
          replies.openAll();
          const third = await startChild(env, 'crash-3');
          children.push(third);
          const { events, got, duplicates } = await everyEventDelivered(db, receiver, 31);
          assert.equal(got.size, 31, 'thirty-one distinct events arrived');
          const sequences = events.map((event) => Number(event.sequence));
          assert.deepEqual(
            sequences,
            [...sequences].sort((a, b) => a - b),
          );
          assert.equal(new Set(sequences).size, 31);
          // The attempts cut short by the kills are in the log, marked abandoned by the worker that took over.
          const abandoned = await db
            .selectFrom('webhook_attempts')
            .select(['worker', 'error'])
            .where('error', 'like', 'abandoned:%')
            .execute();
          assert.deepEqual(
            abandoned.map((a) => a.worker).sort(),
            ['crash-1', 'crash-2'],
            `abandoned attempts (duplicates delivered: ${duplicates})`,
          );
          assert.equal(await third.terminate(), 0, 'a graceful stop exits 0');
        } finally {
          for (const child of children) await child.kill();
          await receiver.close();
        }
      });
    });

    it('with four requests of a lane in flight (WEBHOOK_LANE_WINDOW=4), SIGKILL leaves exactly those four open and a restart delivers every event', async () => {
      await withStore(dialect, async (testStore) => {
        const db = testStore.store.db;
        const env = {
          ...childEnv(testStore, newSecretKey()),
          CHILD_STALE_MS: '20000',
          // Long enough that no held request times out on a slow machine (below the stale time's half).
          WEBHOOK_TIMEOUT_SECONDS: '8',
          WEBHOOK_LANE_WINDOW: '4',
        };
        const {
          instances: [instance],
          key,
        } = await seed(testStore, 1);
        assert.ok(instance);
        // Every reply is held until released here, or answered at once once `open`.
        const held: (() => void)[] = [];
        let open = false;
        const receiver = await startReceiver({
          respond: () =>
            open
              ? { status: 200, body: 'ok' }
              : new Promise((resolve) => held.push(() => resolve({ status: 200, body: 'ok' }))),
        });
        const children: Child[] = [];
        try {
          const first = await startChild(env, 'window-1');
          children.push(first);
          await prepare(first, key, instance.id, receiver.url, '5511999990002');
          // The HistorySync (sequence 3) is claimed alone and held before any message exists.
          await receiver.waitForCount(1, 10_000);
          await first.inbound(key, instance.id, 20, 'w');
          await until(async () => (await deliveryRows(db)).length === 21, 10_000, '21 deliveries queued');
          assert.equal(held.length, 1, 'only the HistorySync is in flight');
          // Its answer lets the next claim take the 20 messages and start four.
          held.shift()?.();
          await receiver.waitForCount(5, 10_000);
          const rows = await deliveryRows(db);
          assert.deepEqual(
            rows.filter((row) => row.status === 'pending' && row.attempts === 1).map((row) => row.sequence),
            [4, 5, 6, 7],
            'four started, in sequence order',
          );
          assert.equal(
            rows.filter((row) => row.locked_by === 'window-1' && row.attempts === 0).length,
            16,
            'the rest of the batch claimed, not started',
          );
          assert.equal(receiver.requests.length, 5, 'no fifth message request while four are in flight');
          await first.kill();

          open = true;
          for (const release of held.splice(0)) release();
          const second = await startChild(env, 'window-2');
          children.push(second);
          const { got } = await everyEventDelivered(db, receiver, 21);
          assert.equal(got.size, 21, 'twenty-one distinct events arrived');
          const abandoned = await db
            .selectFrom('webhook_attempts as a')
            .innerJoin('webhook_deliveries as d', 'd.event_id', 'a.event_id')
            .select(['a.worker', 'd.sequence'])
            .where('a.error', 'like', 'abandoned:%')
            .orderBy('d.sequence')
            .execute();
          assert.deepEqual(
            abandoned.map((row) => [row.worker, Number(row.sequence)]),
            [4, 5, 6, 7].map((sequence) => ['window-1', sequence]),
            'exactly the four requests in flight were cut short',
          );
        } finally {
          for (const child of children) await child.kill();
          await receiver.close();
        }
      });
    });

    if (dialect === 'postgres') {
      it('two processes share one PostgreSQL queue; killing one in flight loses nothing', async () => {
        await withStore(dialect, async (testStore) => {
          const db = testStore.store.db;
          const env = childEnv(testStore, newSecretKey());
          const { instances, key } = await seed(testStore, 3);
          const replies = gate();
          const receiver = await startReceiver({ respond: replies.respond });
          const children: Child[] = [];
          try {
            const a = await startChild(env, 'pair-a');
            const b = await startChild(env, 'pair-b');
            children.push(a, b);
            // Both workers deliver while events are recorded: let 15 answers through, then hold.
            replies.allow(15);
            for (const [index, instance] of instances.entries()) {
              await prepare(a, key, instance.id, receiver.url, `551199999000${index + 1}`);
              await a.inbound(key, instance.id, 10, `p${instance.name}-`);
            }
            await receiver.waitFor(
              (requests) =>
                requests.filter((r) => r.reply.state === 'completed').length >= 15 && requests.length >= 16,
              30_000,
            );
            const inFlight = (await deliveryRows(db)).filter((row) => row.locked_by !== null);
            assert.ok(inFlight.length >= 1, 'a delivery is in flight');
            const holders = new Set(inFlight.map((row) => row.locked_by));
            // Kill a process holding a claim (b if it holds one): its deliveries must be taken over by the other.
            const victim = holders.has('pair-b') ? b : a;
            const survivor = victim === b ? a : b;
            await victim.kill();
            replies.openAll();
            const { got } = await everyEventDelivered(db, receiver, 33);
            assert.equal(got.size, 33, 'thirty-three distinct events arrived');
            const workers = await db
              .selectFrom('webhook_attempts')
              .select('worker')
              .where('status_code', '=', 200)
              .distinct()
              .execute();
            assert.ok(
              workers.some((w) => w.worker === survivor.workerId),
              'the survivor delivered after the kill',
            );
            const perInstance = await db
              .selectFrom('webhook_events')
              .select(['instance_id', (eb) => eb.fn.max('sequence').as('last')])
              .groupBy('instance_id')
              .execute();
            // qr, connected (SessionStatus, not sent), the HistorySync and ten messages.
            assert.deepEqual(
              perInstance.map((row) => Number(row.last)),
              [13, 13, 13],
            );
          } finally {
            for (const child of children) await child.kill();
            await receiver.close();
          }
        });
      });
    }
  });
}
