/**
 * A store whose disk fills up (docs/decisions/0011-store-faults.md): while it is full a send answers 503
 * `store_unavailable` with `Retry-After`, an inbound event waits for the store instead of being given up, and once
 * space is freed the event is stored once and delivered once, without a restart. On SQLite the disk fills for real as
 * far as SQLite can tell: `max_page_count` at the file's size makes every write that needs a new page fail with
 * SQLITE_FULL, and SQLite then rolls the whole transaction back by itself, as it does when the file system answers
 * ENOSPC. Kysely's own rollback after that found no transaction and its error ("cannot rollback - no transaction is
 * active", SQLITE_ERROR) took the place of SQLITE_FULL: the request answered 500 and the recorder gave the event up
 * after five tries. On PostgreSQL the test-only fault hook answers writes with SQLSTATE 53100 (disk full).
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import { type ApiResponse, createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type Receiver, startReceiver, TEST_CA } from '../support/https-receiver.ts';
import { createTestStore, type TestDialect, type TestStore, testDialects } from '../support/store.ts';
import { allDelivered, configureWebhook } from '../webhooks/support.ts';

/** SQLite's largest `max_page_count`, where it is by default. */
const NO_PAGE_LIMIT = 4_294_967_294;

/** A body big enough that storing it needs new pages of the file. */
const BIG = 'x'.repeat(60_000);

/** A disk that fills and is freed again, and how many times the event recorder tried while it was full. */
interface Disk {
  fill(): Promise<void>;
  free(): Promise<void>;
  /** Tries of the event recorder while the disk was full (its first statement takes the instance's sequence row). */
  recordTries: number;
}

/** A test store and the means to fill its disk: SQLite's page limit, or PostgreSQL's "disk full" from the hook. */
async function storeWithDisk(dialect: TestDialect): Promise<{ testStore: TestStore; disk: Disk }> {
  let full = false;
  const disk: Disk = {
    recordTries: 0,
    fill: async () => undefined,
    free: async () => undefined,
  };
  const testStore = await createTestStore(dialect, {
    faults: (text) => {
      if (!full) return;
      if (/insert into "webhook_state"/i.test(text)) disk.recordTries++;
      // The writes of the event recorder and of new sends; others (the credential store, which waits for the store
      // without limit by design) go through, so that each request reaches its own write.
      if (
        dialect === 'postgres' &&
        /insert into "(webhook_state|webhook_events|messages|send_jobs)"/i.test(text)
      )
        throw Object.assign(new Error('could not extend file: No space left on device'), { code: '53100' });
    },
  });
  const { db } = testStore.store;
  disk.fill = async () => {
    if (dialect === 'sqlite') {
      const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(db);
      await sql.raw(`pragma max_page_count = ${Number(rows[0]?.page_count)}`).execute(db);
    }
    full = true;
  };
  disk.free = async () => {
    if (dialect === 'sqlite') await sql.raw(`pragma max_page_count = ${NO_PAGE_LIMIT}`).execute(db);
    full = false;
  };
  return { testStore, disk };
}

for (const dialect of testDialects()) {
  describe(`a store whose disk fills up (${dialect})`, () => {
    let receiver: Receiver;
    let testStore: TestStore;
    let disk: Disk;
    let t: TestApp;

    beforeEach(async () => {
      receiver = await startReceiver();
      ({ testStore, disk } = await storeWithDisk(dialect));
      t = await createTestApp({
        testStore,
        outboundCa: TEST_CA,
        webhookWorker: { pollIntervalMs: 25 },
        env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_SCHEDULE: '1,2,3' },
      });
      await loginSandbox(t);
      await configureWebhook(t, receiver.url);
    });
    afterEach(async () => {
      await disk.free();
      await t.close();
      await testStore.cleanup();
      await receiver.close();
    });

    it('answers 503 while full, keeps an inbound event waiting, then stores and delivers it once when space is freed', async () => {
      await disk.fill();

      const send = await t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: `sent-${BIG}` });
      assert.deepEqual(
        { status: send.status, body: send.body, retryAfter: send.headers['retry-after'] },
        { status: 503, body: { error: { code: 503, message: STORE_UNAVAILABLE } }, retryAfter: '5' },
      );

      let inboundAnswer: ApiResponse | undefined;
      const inbound = t
        .call('POST', '/v1/sandbox/inbound', {
          phone: '5511988887777',
          body: `arrived-${BIG}`,
          pushName: 'Ana',
        })
        .then((answer) => {
          inboundAnswer = answer;
          return answer;
        });
      // Six tries: one more than an error of unknown kind gets. The event is still waiting for the store.
      await eventually('the recording tried six times or the request answered', () => {
        return disk.recordTries >= 6 || inboundAnswer !== undefined;
      });
      assert.deepEqual(
        inboundAnswer && { status: inboundAnswer.status, body: inboundAnswer.body },
        undefined,
        'the inbound request is still waiting for the store',
      );
      assert.equal(t.services.sessions.backlog.count, 1);

      await disk.free();
      const answered = await inbound;
      assert.equal(answered.status, 200, JSON.stringify(answered.body));
      const id: string = answered.body.data.id;

      const stored = await t.testStore.store.db
        .selectFrom('messages')
        .select(['id', 'from_me', 'content'])
        .where('instance_id', '=', t.instance.id)
        .where('content', 'like', '%arrived-x%')
        .execute();
      assert.deepEqual(
        stored.map((row) => ({ id: row.id, fromMe: row.from_me })),
        [{ id, fromMe: 0 }],
      );
      // The send that answered 503 was not kept.
      const sent = await t.testStore.store.db
        .selectFrom('messages')
        .select('id')
        .where('content', 'like', '%sent-x%')
        .execute();
      assert.deepEqual(sent, []);

      const bodies = () =>
        receiver.requests
          .map((request) => request.body.toString('utf8'))
          .filter((body) => body.includes('arrived-x'));
      await eventually('the event delivered', () => bodies().length >= 1);
      await allDelivered(t);
      const [body] = bodies();
      assert.equal(bodies().length, 1);
      assert.equal(JSON.parse(body ?? '{}').event.info.id, id);

      // Writes work again without a restart.
      const again = await t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'after' });
      assert.equal(again.status, 200, JSON.stringify(again.body));
    });
  });
}
