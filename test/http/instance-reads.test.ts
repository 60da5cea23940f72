import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { deleteInstance } from '../../src/store/instances.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { listSignalsHeard } from '../support/list-signals.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The instance a request addresses is read once, by the instance plugin, and handed to the service as an `Instance`
 * (docs/architecture.md, One send request). Reads of the `instances` table are counted on the SQL each query sends
 * (the store's test-only query hook, which also sees the statements compiled once per store); the recorder's
 * projections, which read the instance inside their own transaction for the webhook row, are not the request's and
 * are left out (their async stack runs through src/events). On PostgreSQL the lists are kept between turns until
 * the store signals a change (docs/decisions/0088-kept-instance-lists.md): each test there first changes the
 * instance from another handle and waits for the signal, so its first request reads, and later turns read nothing.
 */
for (const dialect of testDialects()) {
  describe(`one instance read per request [${dialect}]`, () => {
    let testStore: TestStore;
    let counted: Store;
    let t: TestApp;
    let counting = false;
    let reads = 0;
    let jobInserts = 0;
    let generationReads = 0;
    /** Transactions the app's handle has begun and not ended yet (SQLite: its statements name them). */
    let open = 0;
    const countReads = (text: string) => {
      if (/^begin/i.test(text)) open += 1;
      else if (/^(commit|rollback)/i.test(text)) open -= 1;
      if (counting && /^insert into "send_jobs"/i.test(text)) jobInserts += 1;
      if (!counting || !/^select .* from "instances"/i.test(text)) return;
      // The job insert's guard reads the account generation (docs/decisions/0074-logout-cancels-pending-sends.md):
      // counted apart, one a group insert (and one a session, kept by the send queue), not a read of the request's.
      if (/"account_generation"/.test(text)) {
        generationReads += 1;
        return;
      }
      // The whole async stack: the projection's frame sits deeper than the default 10 frames.
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 100;
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      if (!stack.includes('/src/events/')) reads += 1;
    };

    before(async () => {
      testStore = await createTestStore(dialect);
      // A second handle on the same store, whose every query passes the counter.
      counted = await openStore(
        testStore.database,
        testStore.schema === undefined
          ? { faults: countReads }
          : { schema: testStore.schema, faults: countReads },
      );
      t = await createTestApp({ testStore: { ...testStore, store: counted } });
      await loginSandbox(t);
    });
    after(async () => {
      await t.close();
      await counted.destroy();
      await testStore.cleanup();
    });

    /**
     * Runs `write` on another handle of the store, then (PostgreSQL) waits until the app's signals heard every
     * change of the instance lists committed so far, its own among them, so no kept list is left from before.
     */
    async function changedElsewhere(write: () => Promise<unknown>): Promise<void> {
      // On SQLite the other handle's write is synchronous and holds the event loop while it waits for the file's
      // lock: a transaction the app has open then (the send queue's hand-back after the login, which the login's
      // answer does not wait for) could not end, and the write would wait out its busy timeout.
      if (dialect === 'sqlite') await eventually('the app to end its transaction', () => open === 0);
      await write();
      const signals = t.services.signals;
      if (signals !== undefined) await listSignalsHeard(testStore.store.db, signals);
    }

    /** Touches the instance's row from another handle (a change of its list, as another node's would be). */
    const touched = () =>
      changedElsewhere(() =>
        testStore.store.db
          .updateTable('instances')
          .set({ name: 'main' })
          .where('id', '=', t.instance.id)
          .execute(),
      );

    /** Reads of a later turn: none while the list is kept (PostgreSQL), one otherwise. */
    const laterReads = () => (dialect === 'postgres' ? 0 : 1);

    async function readsDuring(run: () => Promise<{ status: number }>): Promise<number> {
      reads = 0;
      counting = true;
      try {
        assert.equal((await run()).status, 200);
      } finally {
        counting = false;
      }
      return reads;
    }

    it('a send reads its instance once', async () => {
      assert.equal(t.services.signals?.listening === true, dialect === 'postgres');
      await touched();
      const send = () => t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'hi' });
      assert.equal(await readsDuring(send), 1);
      assert.equal(await readsDuring(send), laterReads());
    });

    it('requests of one turn share one read of the instance list; a later request sees a new instance', async () => {
      await touched();
      reads = 0;
      counting = true;
      try {
        const answers = await Promise.all(
          Array.from({ length: 8 }, () => t.call('GET', '/v1/session/status')),
        );
        assert.deepEqual(
          answers.map((answer) => answer.status),
          Array.from({ length: 8 }, () => 200),
        );
      } finally {
        counting = false;
      }
      assert.equal(reads, 1, 'eight concurrent requests, one read');
      // An instance another process creates (the CLI, another node) is seen by the next request (on PostgreSQL the
      // kept list lacks it, so it is read again before a 404 could be answered), and gone once deleted (once its
      // signal is heard, on PostgreSQL).
      const created = await adminCreateInstance(testStore.store.db, {
        org: t.org.id,
        env: 'test',
        name: 'second',
      });
      const seen = await t.call('GET', `/v1/session/status?from=${created.id}`);
      assert.equal(seen.status, 200, JSON.stringify(seen.body));
      await changedElsewhere(async () =>
        assert.equal(await deleteInstance(testStore.store.db, created.id), true),
      );
      const gone = await t.call('GET', `/v1/session/status?from=${created.id}`);
      assert.equal(gone.status, 404);
    });

    it('concurrent sends read the instance list once and store their jobs in one statement', async () => {
      await touched();
      reads = 0;
      jobInserts = 0;
      generationReads = 0;
      counting = true;
      try {
        const answers = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: `hi ${i}` }),
          ),
        );
        assert.deepEqual(
          answers.map((answer) => answer.status),
          Array.from({ length: 6 }, () => 200),
        );
      } finally {
        counting = false;
      }
      assert.equal(reads, 1, 'one read of the instance list');
      assert.equal(jobInserts, 1, 'the six jobs in one insert');
      assert.equal(generationReads, 1, "the group insert's one read of the account generation");
    });

    it('a session status and a webhook read read it once', async () => {
      await touched();
      assert.equal(await readsDuring(() => t.call('GET', '/v1/session/status')), 1);
      assert.equal(await readsDuring(() => t.call('GET', '/v1/webhook')), laterReads());
      await touched();
      assert.equal(await readsDuring(() => t.call('GET', '/v1/webhook')), 1);
    });
  });
}
