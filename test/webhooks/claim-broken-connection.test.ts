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
import pg from 'pg';
import type { TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { bodies, recordMessages, webhookAppPerTest } from './support.ts';

/** The parts of node-postgres's client this test reaches into to break a connection as the server commits. */
interface RawClient {
  connection: { stream: { destroy(): void } };
}

/** The SQL text of a `pg.Client.query` call (a string, or a config object's `text`). */
function textOf(first: unknown): string | undefined {
  if (typeof first === 'string') return first;
  if (typeof first === 'object' && first !== null && 'text' in first) {
    const text = (first as { text: unknown }).text;
    return typeof text === 'string' ? text : undefined;
  }
  return undefined;
}

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
      const admin = new pg.Client({
        connectionString: t.testStore.database.dialect === 'postgres' ? t.testStore.database.url : '',
      });
      await admin.connect();
      try {
        // The first claim's commit is held (the switch turns itself off: later claims are not held).
        await admin.query(`create table ${schema}.hold_switch (held boolean not null)`);
        await admin.query(`insert into ${schema}.hold_switch values (true)`);
        await admin.query(`
          create function ${schema}.hold_commit() returns trigger language plpgsql as $$
          begin
            if (select held from ${schema}.hold_switch) then
              update ${schema}.hold_switch set held = false;
              perform pg_sleep(0.6);
            end if;
            return null;
          end $$`);
        await admin.query(`
          create constraint trigger hold_commit after insert on ${schema}.webhook_attempts
          deferrable initially deferred for each row execute function ${schema}.hold_commit()`);
      } finally {
        await admin.end();
      }
      let broken = 0;
      const carrying = new WeakSet<object>();
      const query = pg.Client.prototype.query;
      // A generic override of an overloaded method: the arguments go through untouched.
      (pg.Client.prototype as { query: (...args: unknown[]) => unknown }).query = function (
        this: pg.Client & RawClient,
        ...args: unknown[]
      ) {
        const result = (query as (...a: unknown[]) => unknown).apply(this, args);
        const text = textOf(args[0]);
        if (broken === 0 && text !== undefined) {
          // The claim's last statement writes the started attempts; its `commit` follows on the same connection.
          if (/^insert into "webhook_attempts"/.test(text)) carrying.add(this);
          else if (/^\s*commit/i.test(text) && carrying.has(this)) {
            broken += 1;
            setImmediate(() => this.connection.stream.destroy());
          }
        }
        return result;
      } as typeof pg.Client.prototype.query;
      try {
        await recordMessages(t, 1, 'claimed');
        await eventually('the claim committed unanswered', () => broken > 0);
        await eventually('delivered', () => app.receiver().requests.length > 0);
      } finally {
        pg.Client.prototype.query = query;
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
      const query = pg.Client.prototype.query;
      // The connection is cut as soon as the claim's attempt rows are sent: the server never gets the `commit`, and
      // rolls the claim back, while the client sees the same "Connection terminated" as for a commit cut short.
      (pg.Client.prototype as { query: (...args: unknown[]) => unknown }).query = function (
        this: pg.Client & RawClient,
        ...args: unknown[]
      ) {
        const result = (query as (...a: unknown[]) => unknown).apply(this, args);
        const text = textOf(args[0]);
        if (broken === 0 && text !== undefined && /^insert into "webhook_attempts"/.test(text)) {
          broken += 1;
          this.connection.stream.destroy();
        }
        return result;
      } as typeof pg.Client.prototype.query;
      try {
        await recordMessages(t, 1, 'rolledback');
        await eventually('the claim broken', () => broken > 0);
        await eventually('delivered', () => app.receiver().requests.length > 0);
      } finally {
        pg.Client.prototype.query = query;
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
