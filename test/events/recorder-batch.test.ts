import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import type { TestApp } from '../support/app.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from '../webhooks/support.ts';

/**
 * A batch of the recorder (docs/decisions/0024-engines-and-data-flow.md: events queued while a transaction runs are
 * applied together) is written in bulk: one multi-row insert of messages, of peers, of events and of deliveries,
 * and one sequence upsert for the batch. Counted on the SQL each statement sends (the store's test-only hook).
 */
for (const dialect of testDialects()) {
  describe(`the recorder writes a batch in bulk [${dialect}]`, () => {
    let testStore: TestStore;
    let counted: Store;
    let t: TestApp;
    let statements: string[] = [];
    let counting = false;

    before(async () => {
      testStore = await createTestStore(dialect);
      counted = await openStore(
        testStore.database,
        testStore.schema === undefined
          ? { faults: (text) => void (counting && statements.push(text)) }
          : { schema: testStore.schema, faults: (text) => void (counting && statements.push(text)) },
      );
      t = await createWebhookApp({ dialect, testStore: { ...testStore, store: counted } });
      // A webhook URL, so every event also queues a delivery (nothing listens there: attempts fail and retry).
      await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
    });
    after(async () => {
      await t.close();
      await counted.destroy();
      await testStore.cleanup();
    });

    it('messages, a repeated message, a receipt for one of them and peer names: stored as if one by one, the repeat a copy', async () => {
      const ann = textMessage('from Ann', { phone: '5511911110001' });
      const annAgain = textMessage('Ann, no name', { phone: '5511911110001' });
      annAgain.message.pushName = '';
      const own = textMessage('to Bob', { phone: '5511911110002', fromMe: true });
      const receipt: EngineEvent = {
        type: 'receipt',
        state: 'read',
        messageIds: [own.message.id],
        // Bob acknowledged the account's message: the receipt's side is his.
        source: { ...own.message.source, sender: '5511911110002@s.whatsapp.net', isFromMe: false },
        timestamp: Date.UTC(2025, 0, 2, 3, 4, 6),
      };
      const batch: EngineEvent[] = [ann, annAgain, own, receipt, ann];
      const id = t.instance.id;
      statements = [];
      counting = true;
      try {
        // Recorded in one turn: the first event's transaction starts after all five are queued.
        await Promise.all(batch.map((event) => t.services.recorder.record(id, event)));
      } finally {
        counting = false;
      }
      const count = (pattern: RegExp) => statements.filter((text) => pattern.test(text)).length;
      // Messages delivered live are new: no read of stored ids (src/events/message-copies.ts); the repeat within the
      // batch is told without one. The receipt flushes the three messages before it; the repeated one after it is a
      // copy, written by no insert.
      assert.equal(count(/^select "id", "chat" from "messages"/), 0, 'no look-up for live messages');
      assert.equal(count(/insert into "messages"/), 1);
      assert.equal(count(/insert into "webhook_state"/), 1, 'one sequence upsert for the batch');
      assert.equal(count(/insert into "webhook_events"/), 1);
      assert.equal(count(/insert into "webhook_deliveries"/), 1);
      if (dialect === 'postgres') {
        // Grouped (docs/decisions/0056-write-groups.md): the messages before the receipt with their peers, then the receipt's update; the sequence with the routing version; the events and their
        // deliveries (the copy adds no message row). BEGIN and COMMIT aside. The recorder's statements: the delivery
        // worker's claims and other reads run beside them.
        const written = statements.filter(
          (text) =>
            !text.startsWith('with "heads"') &&
            /"(messages|chat_peers|webhook_state|webhook_events)"/.test(text),
        );
        assert.equal(
          count(/^with w1 as \(insert into "messages" .*\) insert into "chat_peers"/),
          1,
          written.join('\n'),
        );
        assert.equal(
          count(/^insert into "webhook_state" .* returning .*\(select "routing_version" from "instances"/),
          1,
          written.join('\n'),
        );
        assert.equal(
          count(/^with w1 as \(insert into "webhook_events" .*\) insert into "webhook_deliveries"/),
          1,
          written.join('\n'),
        );
        assert.equal(written.length, 4, written.join('\n'));
      }
      // The webhook URL set before the batch raised the instance's routing version
      // (docs/decisions/0065-routing-version.md), so the batch reads the routing once.
      assert.equal(count(/^select "i"\.\*/), 1, 'one routing read for the batch');

      const messages = await counted.db
        .selectFrom('messages')
        .select(['id', 'state', 'from_me'])
        .where('instance_id', '=', id)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        messages,
        [
          { id: ann.message.id, state: 'delivered', from_me: 0 },
          { id: annAgain.message.id, state: 'delivered', from_me: 0 },
          { id: own.message.id, state: 'read', from_me: 1 },
        ].sort((a, b) => a.id.localeCompare(b.id)),
      );
      const peers = await counted.db
        .selectFrom('chat_peers')
        .select(['jid', 'push_name'])
        .where('instance_id', '=', id)
        .orderBy('jid')
        .execute();
      assert.deepEqual(peers, [
        // An empty name later in the batch keeps the name seen before it.
        { jid: '5511911110001@s.whatsapp.net', push_name: 'Tester' },
        { jid: '5511911110002@s.whatsapp.net', push_name: '' },
      ]);
      const events = await counted.db
        .selectFrom('webhook_events')
        .select(['sequence', 'type', 'payload'])
        .where('instance_id', '=', id)
        .orderBy('sequence')
        .execute();
      // Gap-free, in the order recorded: four events (the copy makes none), numbered after whatever the setup
      // recorded.
      const first = Number(events.at(-4)?.sequence);
      assert.deepEqual(
        events.slice(-4).map((row) => [Number(row.sequence), row.type]),
        [
          [first, 'Message'],
          [first + 1, 'Message'],
          [first + 2, 'Message'],
          [first + 3, 'ReadReceipt'],
        ],
      );
      for (const row of events.slice(-4))
        assert.equal(JSON.parse(row.payload).sequence, Number(row.sequence), 'the body carries its sequence');
      assert.equal(await lastSequence(id), first + 3);
      const queued = await counted.db
        .selectFrom('webhook_deliveries')
        .select('sequence')
        .where('instance_id', '=', id)
        .where('sequence', '>=', first)
        .execute();
      assert.equal(queued.length, 4);
    });

    it('a batch whose rows are refused fails alone; the other batch of its turn is kept', async () => {
      const gone = await t.newInstance('live');
      await counted.db.deleteFrom('instances').where('id', '=', gone.id).execute();
      const id = t.instance.id;
      const first = (await lastSequence(id)) + 1;
      const kept = textMessage('kept', { phone: '5511911112001' });
      const refused = textMessage('refused', { phone: '5511911112002' });
      // One turn: on SQLite both batches share a transaction (docs/decisions/0051-turn-groups.md), which the
      // deleted instance's message row fails (its foreign key); each batch is then written alone.
      const [keptResult, refusedResult] = await Promise.allSettled([
        t.services.recorder.record(id, kept),
        t.services.recorder.record(gone.id, refused),
      ]);
      assert.equal(keptResult.status, 'fulfilled');
      assert.equal(refusedResult.status, 'rejected');
      const stored = await counted.db
        .selectFrom('messages')
        .select('id')
        .where('id', 'in', [kept.message.id, refused.message.id])
        .execute();
      assert.deepEqual(
        stored.map((row) => row.id),
        [kept.message.id],
      );
      assert.equal(await lastSequence(id), first);
      const event = await counted.db
        .selectFrom('webhook_events')
        .select('payload')
        .where('instance_id', '=', id)
        .where('sequence', '=', first)
        .executeTakeFirstOrThrow();
      assert.equal(JSON.parse(event.payload).event.message.conversation, 'kept');
    });

    it('a write in the queue: its events recorded with it, in order with the events around it; a failing one keeps nothing', async () => {
      const id = t.instance.id;
      const first = (await lastSequence(id)) + 1;
      const before = textMessage('before the writes', { phone: '5511911113001' });
      const afterwards = textMessage('after the writes', { phone: '5511911113001' });
      const status: EngineEvent = {
        type: 'messageStatus',
        id: '3EB0WRITTEN000000000001',
        status: 'canceled',
        at: 1,
      };
      const refused = new Error('the write refused');
      // One turn: the writes wait their turn behind the first message, the last message behind them
      // (docs/decisions/0076-status-with-its-write.md).
      const [one, written, quiet, failed, two] = await Promise.allSettled([
        t.services.recorder.record(id, before),
        t.services.recorder.recordWith(id, async () => ({ result: 'changed', events: [status] })),
        t.services.recorder.recordWith(id, async () => ({ result: 'unchanged', events: [] })),
        t.services.recorder.recordWith(id, async (trx) => {
          // What it wrote before failing is rolled back with it.
          await trx.deleteFrom('messages').where('id', '=', before.message.id).execute();
          throw refused;
        }),
        t.services.recorder.record(id, afterwards),
      ]);
      assert.deepEqual(
        [one, written, quiet, two].map((result) => result.status === 'fulfilled' && result.value),
        [undefined, 'changed', 'unchanged', undefined],
      );
      assert.deepEqual(failed, { status: 'rejected', reason: refused });
      const events = await counted.db
        .selectFrom('webhook_events')
        .select(['sequence', 'type'])
        .where('instance_id', '=', id)
        .where('sequence', '>=', first)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        events.map((row) => [Number(row.sequence), row.type]),
        [
          [first, 'Message'],
          [first + 1, 'MessageStatus'],
          [first + 2, 'Message'],
        ],
      );
      const kept = await counted.db
        .selectFrom('messages')
        .select('id')
        .where('id', '=', before.message.id)
        .execute();
      assert.equal(kept.length, 1, 'the failed write deleted nothing');
    });

    /** The instance's last sequence number taken; 0 before its first event. */
    async function lastSequence(id: string): Promise<number> {
      const state = await counted.db
        .selectFrom('webhook_state')
        .select('last_sequence')
        .where('instance_id', '=', id)
        .executeTakeFirst();
      return Number(state?.last_sequence ?? 0);
    }
  });
}
