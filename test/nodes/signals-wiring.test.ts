/**
 * The store's signals as two nodes of one PostgreSQL store wire them (docs/decisions/0078-store-signals.md): a
 * delivery attempt that one node's webhook worker finished for an instance whose session the other node holds
 * reaches the live view of the node holding it (the dashboard's stream is served there), and one for an instance
 * the finishing node holds itself is not signalled.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LiveChange } from '../../src/events/live-feed.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`store signals between two nodes' services (${dialect})`, () => {
    let ts: TestStore;
    let a: TestApp;
    let b: TestApp;

    before(async () => {
      ts = await createTestStore(dialect);
      a = await createTestApp({ testStore: ts });
      b = await createTestApp({ testStore: ts });
    });

    after(async () => {
      await b.close();
      await a.close();
      await ts.cleanup();
    });

    it("an attempt finished on one node for an instance held by the other wakes the holder's live view", async () => {
      assert.ok(a.services.signals?.listening && b.services.signals?.listening, 'both nodes listen');
      await loginSandbox(a);
      await loginSandbox(b, '5511999990002');
      assert.ok(a.services.sessions.existing(a.instance.id), "a holds its instance's session");
      const onA: LiveChange[] = [];
      const bOnA: LiveChange[] = [];
      a.services.feed.subscribe(a.instance.id, (change) => onA.push(change));
      a.services.feed.subscribe(b.instance.id, (change) => bOnA.push(change));
      // b's worker finished an attempt for a's instance, then one for its own.
      b.services.feed.attempted(a.instance.id);
      b.services.feed.attempted(b.instance.id);
      await eventually("a's live view is told", () => onA.length > 0);
      assert.deepEqual(onA, ['deliveries']);
      // Both attempts of the same turn would have gone in one signal: b's own instance was not in it.
      assert.deepEqual(bOnA, []);
    });
  });
}
