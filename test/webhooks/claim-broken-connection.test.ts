/**
 * A webhook claim whose PostgreSQL connection really breaks while its commit still runs on the server
 * (docs/decisions/0011-store-faults.md, 0005-outbox-and-delivery.md): the client gives up ("Connection terminated")
 * and the server goes on and commits the claim, its head's attempt counted and its attempt row written. The worker
 * takes the claim for failed and claims again at its next poll; the delivery must still go out then, not wait for its
 * claim to go stale (2 × the timeout + 30 s by default, never under the test's fixed clock) and be logged abandoned
 * for a request that never went out. A deferred constraint trigger holds the claim's commit for 0.6 s; the test closes
 * the socket as soon as that `commit` is written. Only PostgreSQL (TEST_DATABASE_URL).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import {
  adminSql,
  breakConnections,
  breakNextClaimCommit,
  holdCommitFunction,
  holdCommitTrigger,
} from '../support/broken-connections.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { bodies, recordMessages, webhookAppPerTest } from './support.ts';

/** The one delivery row is delivered, unlocked, with one attempt counted. */
async function assertDeliveredOnce(t: TestApp): Promise<void> {
  await eventually('the attempt recorded', async () => {
    const rows = await t.testStore.store.db
      .selectFrom('webhook_deliveries')
      .select(['status', 'attempts', 'locked_by'])
      .execute();
    return rows.length === 1 && rows[0]?.status === 'delivered';
  });
  const rows = await t.testStore.store.db
    .selectFrom('webhook_deliveries')
    .select(['status', 'attempts', 'locked_by'])
    .execute();
  assert.deepEqual(rows, [{ status: 'delivered', attempts: 1, locked_by: null }]);
}

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`a webhook claim whose connection breaks while its commit runs on the server [${dialect}]`, () => {
    const app = webhookAppPerTest({ dialect, webhookWorker: { laneBatch: 2 } });

    it('still delivers the claimed event at once, with one attempt', async () => {
      const t = app.t();
      const schema = t.testStore.schema ?? 'public';
      // The first claim's commit is held (the switch turns itself off: later claims are not held).
      await adminSql(t.testStore, [
        ...holdCommitFunction(schema, true),
        holdCommitTrigger(schema, 'hold_commit', 'insert', 'webhook_attempts'),
      ]);
      const { broken, restore } = breakNextClaimCommit();
      try {
        await recordMessages(t, 1, 'claimed');
        await eventually('the claim committed unanswered', () => broken() > 0);
        await eventually('delivered', () => app.receiver().requests.length > 0);
      } finally {
        restore();
      }
      assert.deepEqual(
        bodies(app.receiver().requests).map((body) => body.event.message.conversation),
        ['claimed1'],
      );
      const attempts = await t.testStore.store.db
        .selectFrom('webhook_attempts')
        .select(['number', 'error'])
        .execute();
      assert.deepEqual(attempts, [{ number: 1, error: null }], 'one attempt, none abandoned');
      await assertDeliveredOnce(t);
    });

    it('claims again at once when the claim broke before its commit reached the server', async () => {
      const t = app.t();
      let broken = 0;
      // The connection is cut as soon as the claim's attempt rows are sent: the server never gets the `commit`, and
      // rolls the claim back, while the client sees the same "Connection terminated" as for a commit cut short.
      const restore = breakConnections((text) => {
        if (broken > 0 || !/^insert into "webhook_attempts"/.test(text)) return undefined;
        broken += 1;
        return 'now';
      });
      try {
        await recordMessages(t, 1, 'rolledback');
        await eventually('the claim broken', () => broken > 0);
        await eventually('delivered', () => app.receiver().requests.length > 0);
      } finally {
        restore();
      }
      assert.deepEqual(
        bodies(app.receiver().requests).map((body) => body.event.message.conversation),
        ['rolledback1'],
      );
      const attempts = await t.testStore.store.db
        .selectFrom('webhook_attempts')
        .select(['number', 'error'])
        .execute();
      assert.deepEqual(attempts, [{ number: 1, error: null }], 'the claim made again: one attempt');
      await assertDeliveredOnce(t);
    });
  });
}
