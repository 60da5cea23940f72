/**
 * The places kept for the lanes of a webhook claim whose commit lost its answer (docs/decisions/0089-lane-window-
 * default.md, docs/decisions/0011-store-faults.md): while the worker asks the store whether the claim was made, no
 * window may take the places those lanes take at once if it was, or the process would hold more requests than
 * `WEBHOOK_MAX_IN_FLIGHT`. The claim's connection really breaks as its commit runs on the server (held there by a
 * deferred trigger), and the question is kept unanswered by the store's fault hook until the test lets it through.
 * Only PostgreSQL (TEST_DATABASE_URL): on SQLite a failed commit is known to have been rolled back.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  adminSql,
  armHold,
  breakNextClaimCommit,
  holdCommitFunction,
  holdCommitTrigger,
} from '../support/broken-connections.ts';
import { eventually } from '../support/eventually.ts';
import type { Receiver } from '../support/https-receiver.ts';
import { storeOutage, testDialects } from '../support/store.ts';
import { faultedWorkerPerTest, textMessage } from './support.ts';

/** The first statement of the worker's question whether a claim whose commit lost its answer was made. */
const QUESTION = /^set local lock_timeout/;

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`webhook places kept for the lanes of a claim whose commit lost its answer [${dialect}]`, () => {
    const fixture = faultedWorkerPerTest();
    const { held } = fixture;

    it('a window opened meanwhile leaves them free: never more requests than the bound once the claim is found made', async () => {
      let questioning = false;
      let questions = 0;
      const { store, app } = await fixture.start(
        dialect,
        (sql) => {
          if (!questioning || !QUESTION.test(sql)) return;
          questions += 1;
          throw storeOutage(dialect);
        },
        { WEBHOOK_CONCURRENCY: '3', WEBHOOK_MAX_IN_FLIGHT: '10', WEBHOOK_LANE_WINDOW: '8' },
      );
      const schema = store.schema ?? 'public';
      // A claim's heads insert their attempt rows; the commit after them is held on the server once armed.
      await adminSql(store, [
        ...holdCommitFunction(schema, false),
        holdCommitTrigger(schema, 'hold_commit', 'insert', 'webhook_attempts'),
      ]);
      /** A new instance whose webhook is a receiver holding every reply, with `count` events queued in one turn. */
      const busyLane = async (name: string, count: number): Promise<Receiver> => {
        const { instance, receiver } = await fixture.lane(name, fixture.holding());
        await Promise.all(
          Array.from({ length: count }, (_, index) =>
            app.services.recorder.record(instance.id, textMessage(`${name}${index}`)),
          ),
        );
        return receiver;
      };
      const sequences = (receiver: Receiver) =>
        receiver.requests.map(
          (request) => (JSON.parse(request.body.toString()) as { sequence: number }).sequence,
        );

      // Lane a alone: its head and a window of seven, eight of the ten places (two kept for the lanes still to claim).
      const a = await busyLane('a', 8);
      await eventually('lane a open', () => held.length === 8);

      // Lane b is claimed; the claim's connection breaks as its commit runs on the server, which commits it.
      await armHold(store);
      const { broken, restore } = breakNextClaimCommit();
      questioning = true;
      let b: Receiver | undefined;
      try {
        b = await busyLane('b', 8);
        await eventually('the claim of b asked about', () => broken() === 1 && questions > 0);
      } finally {
        restore();
      }

      // Lane d is claimed while the question goes unanswered: the last lane free, a place for its head, none for a
      // window (the one place left is b's, should its claim have been made).
      const d = await busyLane('d', 8);
      await eventually("lane d's head", () => d.requests.length >= 1);
      assert.equal(app.services.webhooks.requestsInFlight, 9, 'no window for d');

      // The store answers: the claim was made, and b takes the place kept for it.
      questioning = false;
      const lost = b;
      await eventually('b sent', () => lost.requests.length === 1);
      assert.equal(app.services.webhooks.requestsInFlight, 10);
      assert.deepEqual(
        [a, b, d].map((receiver) => receiver.requests.length),
        [8, 1, 1],
      );

      let released = 0;
      while (released < 24) {
        await eventually('a reply held', () => held.length > 0);
        held.shift()?.();
        released += 1;
      }
      for (const receiver of [a, b, d])
        assert.deepEqual(sequences(receiver), [1, 2, 3, 4, 5, 6, 7, 8], 'each lane in sequence order, once');
      assert.equal(fixture.mostHeld, 10, 'never more than ten requests held at once');
      await eventually('every place given back', () => app.services.webhooks.requestsInFlight === 0);
    });
  });
}
