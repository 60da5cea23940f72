/**
 * A session's connection change and the `SessionStatus` event it means commit together (as a send's outcome and its
 * `MessageStatus`, docs/decisions/0076-status-with-its-write.md): a store that refuses the event's row (a permanent
 * error, injected through the store's test-only fault hook, standing in for a crash between two transactions) must
 * not leave the instance row changed (its account unlinked) with no `SessionStatus` event and the account's pending
 * sends never canceled (docs/decisions/0074-logout-cancels-pending-sends.md). Runs on SQLite, and on PostgreSQL
 * when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN, PEER, storedBodies } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { checkViolation, createTestStore, type TestStore, testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`a connection change commits with its SessionStatus event [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    /** While true, every statement writing an event row fails. */
    let failing = false;
    let refused = 0;

    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (failing && /insert into "webhook_events"/i.test(sql)) {
            refused += 1;
            throw checkViolation('webhook_events');
          }
        },
      });
      t = await appFor(dialect, { testStore });
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(async () => {
      await t.close();
      await testStore.cleanup();
    });

    it('a logout whose SessionStatus row the store refuses does not leave the account unlinked without its event', async () => {
      const sendAt = new Date(T0 + 600_000).toISOString();
      const scheduled = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'later', sendAt });
      assert.equal(scheduled.status, 202, JSON.stringify(scheduled.body));
      const id: string = scheduled.body.data.id;
      /** Either the unlink was kept with its event and its cancel, or none of them was. */
      const consistent = async (message: string) => {
        const instance = await t.services.store.db
          .selectFrom('instances')
          .select(['jid'])
          .where('id', '=', t.instance.id)
          .executeTakeFirstOrThrow();
        const loggedOut = (await storedBodies(t, 'SessionStatus')).filter(
          (body) => body.event.status === 'logged_out',
        );
        const job = await t.services.store.db
          .selectFrom('send_jobs')
          .select('status')
          .where('instance_id', '=', t.instance.id)
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.deepEqual(
          { unlinked: instance.jid === null, events: loggedOut.length, job: job.status },
          instance.jid === null
            ? { unlinked: true, events: 1, job: 'canceled' }
            : { unlinked: false, events: 0, job: 'pending' },
          message,
        );
      };

      failing = true;
      const refusedBefore = refused;
      let res: Awaited<ReturnType<TestApp['call']>>;
      try {
        res = await t.call('POST', '/v1/session/logout');
      } finally {
        failing = false;
      }
      assert.ok(refused > refusedBefore, 'the event row was refused');

      await consistent(`the refused logout answered ${res.status} ${JSON.stringify(res.body)}`);

      // Logged out again once the store takes the row: whatever the first one kept, the pair is whole.
      const again = await t.call('POST', '/v1/session/logout');
      await consistent(`the second logout answered ${again.status} ${JSON.stringify(again.body)}`);
    });
  });
}
