/**
 * An inbound event whose `commit` was still running on the server when its connection broke (docs/decisions/0011-
 * store-faults.md): the recorder asks the store whether the batch was kept, and must not take "not yet visible" for
 * "not kept". Read on another connection before the first commit ends, the batch looked lost, was recorded again,
 * and once the first commit ended the store held the message's event twice (two webhook ids for one message).
 *
 * The fault is made real: a deferred constraint trigger holds the commit on the server for 0.6 s, and the test
 * closes the connection's socket as soon as the `commit` is written, so node-postgres fails it ("Connection
 * terminated") while the server goes on and commits. Only PostgreSQL (TEST_DATABASE_URL): an embedded SQLite store
 * has no connection to lose.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN, PEER, storedBodies } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import {
  adminSql,
  breakConnections,
  holdCommitFunction,
  holdCommitTrigger,
} from '../support/broken-connections.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const BODY = 'held at its commit';

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`an inbound event whose commit is still running when its connection breaks [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    /** While true, the next `commit` after an event row's insert is written and then its connection is closed. */
    let armed = false;
    let carriesEvent = false;
    let broken = 0;
    let restore: (() => void) | undefined;

    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (armed && /insert into "webhook_events"/i.test(sql)) carriesEvent = true;
        },
      });
      const schema = testStore.schema ?? 'public';
      await adminSql(testStore, [
        ...holdCommitFunction(schema),
        holdCommitTrigger(schema, 'hold_commit', 'insert', 'webhook_events', `new.payload like '%${BODY}%'`),
      ]);
      restore = breakConnections((text) => {
        if (!armed || !carriesEvent || !/^\s*commit/i.test(text)) return undefined;
        armed = false;
        carriesEvent = false;
        broken += 1;
        // The `commit` is on the wire; the server runs it, the client never hears back.
        return 'after';
      });
      t = await appFor(dialect, { testStore });
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(async () => {
      restore?.();
      await t.close();
      await testStore.cleanup();
    });

    it('is one Message event, not two', async () => {
      armed = true;
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: BODY });
      armed = false;
      assert.equal(broken, 1, 'a connection broke as it committed');
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
