import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { eventLogSelect } from '../../src/store/webhook-events.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp } from '../webhooks/support.ts';

/**
 * The event log's storage (docs/decisions/0030-event-log.md): each entry is the webhook body a real HTTPS receiver
 * got, byte for byte, unsubscribed types logged too, and the log's query plans an index scan of
 * `(instance_id, sequence)` in order, never a sort. The API: event-log.test.ts.
 */

const PEER = '5511988887777';
const ENTERPRISE = { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 } as const;

for (const dialect of testDialects()) {
  describe(`event log: each entry is the webhook body, byte for byte [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    before(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({ dialect, plan: ENTERPRISE });
    });
    after(async () => {
      await t?.close();
      await receiver?.close();
    });

    it('sent events match their entries without createdAt; unsubscribed ones are logged too', async () => {
      const connect = await t.call('POST', '/v1/session/connect', { subscribe: ['Message', 'ReadReceipt'] });
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      await configureWebhook(t, receiver.url);
      const scan = await t.call('POST', '/v1/sandbox/scan', { phone: '5511999990001' });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'hello *log*' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const inbound = await t.call('POST', '/v1/sandbox/inbound', {
        phone: PEER,
        body: 'hi',
        pushName: 'Ana',
      });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      const read = await t.call('POST', '/v1/sandbox/receipt', { id: sent.body.data.id, state: 'read' });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const typed = await t.call('POST', '/v1/sandbox/presence', { phone: PEER, state: 'composing' });
      assert.equal(typed.status, 200, JSON.stringify(typed.body));

      const received = await receiver.waitForCount(3, 10_000);
      const log = (await t.call('GET', '/v1/events')).body.data;
      assert.deepEqual(
        log.events.map((e: { sequence: number; type: string }) => [e.sequence, e.type]),
        [
          [1, 'SessionStatus'],
          [2, 'SessionStatus'],
          [3, 'HistorySync'],
          [4, 'Message'],
          [5, 'Message'],
          [6, 'ReadReceipt'],
          [7, 'ChatPresence'],
        ],
      );
      const bySequence = new Map<number, Record<string, unknown>>(
        log.events.map((e: Record<string, unknown>) => [e.sequence, e]),
      );
      const bodies = received.map((request) => request.body.toString('utf8'));
      assert.deepEqual(
        bodies.map((body) => JSON.parse(body).sequence),
        [4, 5, 6],
      );
      for (const body of bodies) {
        const entry = bySequence.get(JSON.parse(body).sequence);
        assert.ok(entry);
        const { createdAt, ...webhookBody } = entry;
        assert.equal(JSON.stringify(webhookBody), body);
        assert.match(String(createdAt), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      }
      // The unsent ones carry the body they were stored with (the delivery log's payload).
      const stored = await t.testStore.store.db
        .selectFrom('webhook_events')
        .select(['sequence', 'payload', 'created_at'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('sequence')
        .execute();
      for (const row of stored) {
        const { createdAt, ...webhookBody } = bySequence.get(Number(row.sequence)) ?? {};
        assert.equal(JSON.stringify(webhookBody), row.payload);
        assert.equal(createdAt, new Date(Number(row.created_at)).toISOString());
      }
    });
  });

  describe(`event log: the query reads the (instance_id, sequence) index [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    it('plans an index scan in sequence order, with or without types, never a sort', async () => {
      const db = t.testStore.store.db;
      const other = await t.newInstance('test', 'busy');
      // Enough rows over two instances that the planner prefers the index on its own statistics.
      const rows = [t.instance.id, other.id].flatMap((instanceId) =>
        Array.from({ length: 2000 }, (_, i) => ({
          id: `${instanceId.slice(0, 8)}-${String(i).padStart(27, '0')}`,
          instance_id: instanceId,
          sequence: i + 1,
          type: i % 3 === 0 ? 'ReadReceipt' : 'Message',
          payload: '{}',
          skip_reason: null,
          created_at: t.clock(),
        })),
      );
      for (let i = 0; i < rows.length; i += 500)
        await db
          .insertInto('webhook_events')
          .values(rows.slice(i, i + 500))
          .execute();
      await sql`analyze webhook_events`.execute(db);
      for (const types of [undefined, ['Message', 'ReadReceipt']]) {
        const query = eventLogSelect(db, t.instance.id, {
          after: 1500,
          limit: 100,
          ...(types === undefined ? {} : { types }),
        }).compile();
        const explain = (prefix: string) =>
          db.executeQuery<Record<string, string>>(
            CompiledQuery.raw(`${prefix} ${query.sql}`, [...query.parameters]),
          );
        if (dialect === 'sqlite') {
          const plan = await explain('explain query plan');
          const details = plan.rows.map((row) => row.detail).join('\n');
          assert.match(
            details,
            /USING INDEX sqlite_autoindex_webhook_events_\d+ \(instance_id=\? AND sequence>\?\)/,
            details,
          );
          assert.doesNotMatch(details, /TEMP B-TREE/, details);
        } else {
          const plan = await explain('explain');
          const details = plan.rows.map((row) => row['QUERY PLAN']).join('\n');
          assert.match(details, /Index Scan using webhook_events_instance_sequence/, details);
          assert.doesNotMatch(details, /Sort/, details);
        }
      }
    });
  });
}
