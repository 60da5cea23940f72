/**
 * Row-set inserts (src/store/row-sets.ts, docs/decisions/0083-row-set-inserts.md) in write groups: on PostgreSQL
 * one statement a table whose text does not follow the number of rows, the rows of several parts of a group merged
 * into it, an upsert's repeated keys never in one statement; on SQLite the values lists as before. Counted on the
 * SQL each statement sends (the store's test-only hook), with the rows read back. Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import type { EngineMessage } from '../../src/domain/messages.ts';
import { insertDeliveriesWrites } from '../../src/store/deliveries.ts';
import { createInstance } from '../../src/store/instances.ts';
import { insertMessagesWrites, listChatPeers, touchPeersWrites } from '../../src/store/messages.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { newRowId } from '../../src/store/row-ids.ts';
import type { Database } from '../../src/store/schema.ts';
import { insertWebhookEventsWrites, type NewWebhookEvent } from '../../src/store/webhook-events.ts';
import { deferWrites, runWriteGroup } from '../../src/store/write-groups.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const NOW = '2026-01-02T03:04:05.000Z';

for (const dialect of testDialects()) {
  describe(`row-set inserts [${dialect}]`, () => {
    let testStore: TestStore;
    let statements: string[] = [];
    let first: string;
    let second: string;

    before(async () => {
      testStore = await createTestStore(dialect, { faults: (text) => void statements.push(text) });
      const org = await createOrganization(testStore.store.db, { name: 'row sets', plan: 'pro' });
      const open = (name: string) => createInstance(testStore.store.db, { orgId: org.id, env: 'test', name });
      first = (await open('first')).id;
      second = (await open('second')).id;
    });
    after(() => testStore.cleanup());

    /** `count` events of `instanceId` from sequence `from` on, payloads carrying `note`. */
    function events(instanceId: string, from: number, count: number, note = 'n'): NewWebhookEvent[] {
      return Array.from({ length: count }, (_, index) => ({
        id: newRowId(),
        instanceId,
        sequence: from + index,
        type: 'Message',
        payload: JSON.stringify({ sequence: from + index, note }),
        skipReason: null,
        createdAt: NOW,
      }));
    }

    /** One delivery (default webhook) for each of `rows`. */
    function deliveriesOf(rows: readonly NewWebhookEvent[]) {
      return rows.map((event) => ({
        eventId: event.id,
        instanceId: event.instanceId,
        sequence: event.sequence,
        maxAttempts: 5,
        runAt: Date.parse(NOW),
        now: NOW,
      }));
    }

    /** Runs `work` in a transaction; → the statements it sent, BEGIN and COMMIT aside. */
    async function sent(work: (trx: Kysely<Database>) => Promise<void>): Promise<string[]> {
      statements = [];
      await testStore.store.db.transaction().execute((trx) => work(trx));
      return statements.filter((text) => !/^(begin|commit)/i.test(text));
    }

    async function storedSequences(
      instanceId: string,
      from: number,
    ): Promise<{ events: number[]; deliveries: number[] }> {
      const read = async (table: 'webhook_events' | 'webhook_deliveries') =>
        (
          await testStore.store.db
            .selectFrom(table)
            .select('sequence')
            .where('instance_id', '=', instanceId)
            .where('sequence', '>=', from)
            .where('sequence', '<', from + 1000)
            .orderBy('sequence')
            .execute()
        ).map((row) => Number(row.sequence));
      return { events: await read('webhook_events'), deliveries: await read('webhook_deliveries') };
    }

    it('merges the parts of a group into one clause a table on PostgreSQL, whatever the number of rows', async () => {
      const a = events(first, 1, 2);
      const b = events(second, 1, 3);
      const texts = await sent(async (trx) => {
        deferWrites(trx, [insertWebhookEventsWrites(a), insertDeliveriesWrites(deliveriesOf(a))]);
        deferWrites(trx, [insertWebhookEventsWrites(b), insertDeliveriesWrites(deliveriesOf(b))]);
        await runWriteGroup(trx, []);
      });
      if (dialect === 'postgres') {
        assert.equal(texts.length, 1, texts.join('\n'));
        const text = texts[0] ?? '';
        assert.equal(text.match(/insert into/g)?.length, 2, text);
        assert.match(
          text,
          /^with w1 as \(insert into "webhook_events" .* json_populate_recordset\(null::"webhook_events", \$1::json\)\) insert into "webhook_deliveries" .* json_populate_recordset\(null::"webhook_deliveries", \$2::json\)$/,
        );
        // The same text for other numbers of rows: one named statement serves them all.
        const c = events(first, 10, 7);
        const again = await sent(async (trx) => {
          await runWriteGroup(trx, [insertWebhookEventsWrites(c), insertDeliveriesWrites(deliveriesOf(c))]);
        });
        assert.deepEqual(again, texts);
      } else {
        // SQLite: the values lists, one statement a part and table, in order.
        assert.deepEqual(
          texts.map((text) => /^insert into "(\w+)"/.exec(text)?.[1]),
          ['webhook_events', 'webhook_deliveries', 'webhook_events', 'webhook_deliveries'],
        );
      }
      assert.deepEqual(await storedSequences(first, 1), {
        events: dialect === 'postgres' ? [1, 2, 10, 11, 12, 13, 14, 15, 16] : [1, 2],
        deliveries: dialect === 'postgres' ? [1, 2, 10, 11, 12, 13, 14, 15, 16] : [1, 2],
      });
      assert.deepEqual(await storedSequences(second, 1), { events: [1, 2, 3], deliveries: [1, 2, 3] });
    });

    it('keeps every character of a row: quotes, backslashes, $n, line breaks, emoji, a lone surrogate as U+FFFD', async () => {
      const note = `it's "quoted" \\ back\\slash \\ud800 $1 ? \n\t 🙂 \u00e9`;
      const [event] = events(first, 100, 1, note);
      assert.ok(event);
      const lone = { ...event, id: newRowId(), sequence: 101, payload: 'before \ud800 after \udc00' };
      await sent((trx) => runWriteGroup(trx, [insertWebhookEventsWrites([event, lone])]));
      const rows = await testStore.store.db
        .selectFrom('webhook_events')
        .select(['sequence', 'payload'])
        .where('instance_id', '=', first)
        .where('sequence', 'in', [100, 101])
        .orderBy('sequence')
        .execute();
      assert.equal(rows[0]?.payload, event.payload);
      // PostgreSQL: U+FFFD for each lone surrogate, what `pg` sends for one in a text parameter. (SQLite's driver
      // writes its bytes as they are, read back as three U+FFFD: that path is not a row set's.)
      if (dialect === 'postgres') assert.equal(rows[1]?.payload, 'before \ufffd after \ufffd');
      else assert.match(rows[1]?.payload ?? '', /^before \ufffd+ after \ufffd+$/);
      assert.equal((JSON.parse(rows[0]?.payload ?? '{}') as { note: string }).note, note);
    });

    it('never puts one peer twice in an upsert: repeated keys run as a statement of their own, later name kept', async () => {
      const message = (id: string, chat: string): EngineMessage => ({
        id,
        source: { chat, sender: chat, isFromMe: false, isGroup: false },
        pushName: '',
        timestamp: Date.parse(NOW) / 1000,
        content: { kind: 'text', text: id },
      });
      const alice = '15550001111@s.whatsapp.net';
      const bob = '15550002222@s.whatsapp.net';
      const texts = await sent(async (trx) => {
        deferWrites(trx, [
          insertMessagesWrites(first, [{ message: message('m1', alice), state: 'delivered' }], NOW),
          touchPeersWrites(first, [{ jid: alice, pushName: 'Alice' }], NOW),
        ]);
        // Another part of the group: Alice again (same instance and JID) and Bob; the other instance's Alice.
        deferWrites(trx, [
          insertMessagesWrites(first, [{ message: message('m2', bob), state: 'delivered' }], NOW),
          touchPeersWrites(
            first,
            [
              { jid: alice, pushName: 'Alice B.' },
              { jid: bob, pushName: 'Bob' },
            ],
            NOW,
          ),
        ]);
        deferWrites(trx, [touchPeersWrites(second, [{ jid: alice, pushName: 'Alice 2' }], NOW)]);
        await runWriteGroup(trx, []);
      });
      if (dialect === 'postgres') {
        // Messages in one statement; peers in two (the second holds the repeated key), so not one group.
        assert.deepEqual(
          texts.map((text) => /^insert into "(\w+)"/.exec(text)?.[1]),
          ['messages', 'chat_peers', 'chat_peers'],
          texts.join('\n'),
        );
      } else {
        assert.equal(texts.length, 5, texts.join('\n'));
      }
      const peers = async (instanceId: string) =>
        (await listChatPeers(testStore.store.db, instanceId)).map((peer) => [peer.jid, peer.pushName]).sort();
      assert.deepEqual(await peers(first), [
        [alice, 'Alice B.'],
        [bob, 'Bob'],
      ]);
      assert.deepEqual(await peers(second), [[alice, 'Alice 2']]);
    });

    it('refuses a row that lacks a field, naming it, and writes nothing', async () => {
      const [event] = events(first, 200, 1);
      assert.ok(event);
      const broken = { ...event, skipReason: undefined } as unknown as NewWebhookEvent;
      await assert.rejects(
        sent((trx) => runWriteGroup(trx, [insertWebhookEventsWrites([event, broken])])),
        (error: Error) => error instanceof RangeError && /item 1 has no skip_reason/.test(error.message),
      );
      assert.deepEqual(await storedSequences(first, 200), { events: [], deliveries: [] });
    });
  });
}
