/**
 * An inbound event whose transaction committed but whose `commit` answer was lost (the connection to a remote store
 * broke as it answered, docs/decisions/0011-store-faults.md) is recorded once: retrying it as a transient failure
 * writes the event a second time, and a receiver is sent the same message twice under two webhook ids
 * (docs/decisions/0024-engines-and-data-flow.md: no event may be written twice). The lost answer is injected by
 * wrapping the PostgreSQL driver's `commit` in this process: the commit is carried out, then fails as a reset
 * connection. Only PostgreSQL (TEST_DATABASE_URL): an embedded SQLite store has no connection to lose.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN, PEER, storedBodies } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { type LostCommitAfter, loseNextCommitAfter } from '../support/lost-commits.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`an inbound event whose commit answer is lost [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    /** While armed, the next transaction that writes an event row commits and then fails as a reset connection. */
    let commits: LostCommitAfter | undefined;

    before(async () => {
      const lostCommits = loseNextCommitAfter(/insert into "webhook_events"/i);
      commits = lostCommits;
      testStore = await createTestStore(dialect, { faults: (sql) => lostCommits.seen(sql) });
      t = await appFor(dialect, { testStore });
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(async () => {
      commits?.restore();
      await t.close();
      await testStore.cleanup();
    });

    it('an inbound message whose commit answer was lost is one Message event, not two', async () => {
      commits?.arm(true);
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'only once' });
      commits?.arm(false);
      assert.equal(commits?.lost(), 1, 'a commit answer was lost');
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      const id: string = inbound.body.data.id;
      const events = (await storedBodies(t, 'Message')).filter((body) => body.event.info.id === id);
      assert.equal(
        events.length,
        1,
        `the sequences of its Message events: ${JSON.stringify(events.map((e) => e.sequence))}`,
      );
    });
  });
}
