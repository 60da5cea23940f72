/**
 * The place kept for a lane batch that is ending (docs/decisions/0089-lane-window-default.md): a batch that stopped
 * sending (its receiver answered 500) gives its places back as its requests end, then gives back the deliveries it
 * did not start, a statement the store may take a while to answer. Meanwhile it still counts as a lane, so it is not
 * one the process may claim, yet its lane becomes claimable the moment it ends; a window opened meanwhile must leave a
 * place for that lane's first request. Before, such a window took it, and another instance's event waited for a
 * place while a lane was free, as long as the window's requests lasted. The giving back is held by the store's fault
 * hook until the test lets it through. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventually } from '../support/eventually.ts';
import { storeOutage, testDialects } from '../support/store.ts';
import { faultedWorkerPerTest, textMessage } from './support.ts';

/** The statement giving a lane batch's unstarted deliveries back (src/store/deliveries.ts `returnUnstarted`). */
const RETURN_UNSTARTED =
  /^update "webhook_deliveries" set "locked_by" = (\?|\$\d+), "locked_at" = (\?|\$\d+) where/;

for (const dialect of testDialects()) {
  describe(`webhook places kept for a lane batch that is ending [${dialect}]`, () => {
    const fixture = faultedWorkerPerTest();
    const { held } = fixture;

    it("a window opened meanwhile leaves the ending lane's place free for the next lane's first request", async () => {
      let holding = false;
      let refused = 0;
      const { app } = await fixture.start(
        dialect,
        (sql) => {
          if (!holding || !RETURN_UNSTARTED.test(sql)) return;
          refused += 1;
          throw storeOutage(dialect);
        },
        { WEBHOOK_CONCURRENCY: '2', WEBHOOK_MAX_IN_FLIGHT: '4', WEBHOOK_LANE_WINDOW: '4' },
      );
      const worker = app.services.webhooks;
      const failing = await fixture.lane('failing', async () => ({ status: 500, body: 'no' }));
      const busy = await fixture.lane('busy', fixture.holding());
      const next = await fixture.lane('next', async () => ({ status: 200, body: 'ok' }));

      // The failing lane's batch stops at its first 500 and holds on giving back the rest.
      holding = true;
      await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          app.services.recorder.record(failing.instance.id, textMessage(`f${i}`)),
        ),
      );
      await eventually(
        'the failing batch giving back, its requests ended',
        () => refused > 0 && worker.requestsInFlight === 0,
      );
      assert.equal(worker.inFlight, 1, 'the ending batch still counts as a lane');

      // The busy lane is claimed now: its window leaves one place for the lane the ending batch frees.
      await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          app.services.recorder.record(busy.instance.id, textMessage(`b${i}`)),
        ),
      );
      await eventually('the busy window open', () => held.length === 3);
      assert.equal(worker.requestsInFlight, 3, 'head and a window of two: one of four places kept');

      // The ending batch gives its deliveries back and ends: the next instance's event goes at once.
      holding = false;
      await eventually('the ending batch gone', () => worker.inFlight === 1);
      await app.services.recorder.record(next.instance.id, textMessage('n0'));
      await eventually(
        'the next lane delivered while the busy window holds its places',
        () => next.receiver.requests.length === 1 && held.length === 3,
      );
      assert.ok(worker.requestsInFlight <= 4, 'never more requests than the bound');
      await eventually(
        "the next lane's request recorded, its place given back",
        () => worker.requestsInFlight === 3,
      );
    });
  });
}
