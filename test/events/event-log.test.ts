import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { EVENT_TYPES } from '../../src/domain/instance.ts';
import type { EngineEvent, MessageSource } from '../../src/domain/messages.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * The event log, `GET /v1/events` (docs/api.md#event-log, docs/decisions/0030-event-log.md): every recorded event of
 * an instance in sequence order, with or without a webhook, each the exact webhook body plus `createdAt`. Entries
 * against what a receiver got, and the log's query plan: event-log-storage.test.ts.
 */

const PEER = '5511988887777';
const peerJid = `${PEER}@s.whatsapp.net`;
const source: MessageSource = { chat: peerJid, sender: peerJid, isFromMe: false, isGroup: false };
/** The platform time of every recorded event (epoch ms). */
const AT = Date.UTC(2026, 0, 15, 12, 0, 0);
const AT_ISO = '2026-01-15T12:00:00.000Z';
const ALLOWED = EVENT_TYPES.join(', ');
const ENTERPRISE = { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 } as const;

const message = (id: string, text: string): EngineEvent => ({
  type: 'message',
  message: { id, source, pushName: 'Ana', timestamp: AT, content: { kind: 'text', text } },
});
const receipt = (id: string): EngineEvent => ({
  type: 'receipt',
  state: 'read',
  messageIds: [id],
  source,
  timestamp: AT,
});
const typing: EngineEvent = { type: 'presence', source, state: 'composing', media: '' };

/** The log entry (webhook body plus `createdAt`) of each event above. */
const messageEntry = (instanceId: string, sequence: number, createdAt: string, id: string, text: string) => ({
  type: 'Message',
  event: {
    info: { id, messageSource: source, pushName: 'Ana', timestamp: AT_ISO },
    message: { conversation: text },
  },
  instanceId,
  sequence,
  createdAt,
});
const receiptEntry = (instanceId: string, sequence: number, createdAt: string, id: string) => ({
  type: 'ReadReceipt',
  state: 'Read',
  event: { messageIds: [id], messageSource: source, timestamp: AT_ISO },
  instanceId,
  sequence,
  createdAt,
});
const typingEntry = (instanceId: string, sequence: number, createdAt: string) => ({
  type: 'ChatPresence',
  event: { messageSource: source, state: 'composing', media: '' },
  instanceId,
  sequence,
  createdAt,
});

const page = (events: unknown[], next: number) => ({ success: true, code: 200, data: { events, next } });
const bad = (status: number, message: string) => ({ error: { code: status, message } });

for (const dialect of testDialects()) {
  describe(`event log: GET /v1/events (docs/decisions/0030-event-log.md) [${dialect}]`, () => {
    let t: TestApp;
    /** An instance with five recorded events and no webhook, and the expected entry of each (sequence 1 to 5). */
    let logged: { id: string; entries: unknown[] };

    before(async () => {
      t = await createTestApp({ dialect, plan: ENTERPRISE });
      const instance = await t.newInstance('test', 'logged');
      const times: string[] = [];
      const events = [
        message('3EB0AA0000000000000001', 'first'),
        receipt('3EB0AA0000000000000001'),
        typing,
        message('3EB0AA0000000000000002', 'second'),
        message('3EB0AA0000000000000003', 'third'),
      ];
      for (const event of events) {
        t.clock.advance(1000);
        times.push(new Date(t.clock()).toISOString());
        await t.services.recorder.record(instance.id, event);
      }
      const [t1 = '', t2 = '', t3 = '', t4 = '', t5 = ''] = times;
      logged = {
        id: instance.id,
        entries: [
          messageEntry(instance.id, 1, t1, '3EB0AA0000000000000001', 'first'),
          receiptEntry(instance.id, 2, t2, '3EB0AA0000000000000001'),
          typingEntry(instance.id, 3, t3),
          messageEntry(instance.id, 4, t4, '3EB0AA0000000000000002', 'second'),
          messageEntry(instance.id, 5, t5, '3EB0AA0000000000000003', 'third'),
        ],
      };
    });
    after(() => t.close());

    const get = (query: string, headers: Record<string, string> = {}) =>
      t.call('GET', `/v1/events?${query}`, undefined, headers);
    const entries = (...sequences: number[]) => sequences.map((s) => logged.entries[s - 1]);

    it('records every event with no webhook configured, and queues no delivery', async () => {
      const db = t.testStore.store.db;
      const rows = await db
        .selectFrom('webhook_events')
        .select(['sequence', 'type', 'skip_reason'])
        .where('instance_id', '=', logged.id)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        rows.map((row) => [Number(row.sequence), row.type, row.skip_reason]),
        [
          [1, 'Message', 'no webhook URL configured'],
          [2, 'ReadReceipt', 'no webhook URL configured'],
          [3, 'ChatPresence', 'no webhook URL configured'],
          [4, 'Message', 'no webhook URL configured'],
          [5, 'Message', 'no webhook URL configured'],
        ],
      );
      const deliveries = await db
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('instance_id', '=', logged.id)
        .execute();
      assert.deepEqual(deliveries, []);
      assert.deepEqual((await get(`from=${logged.id}`)).body, page(entries(1, 2, 3, 4, 5), 5));
    });

    it('pages in sequence order: next is the last sequence of a full page, then how far the log was read', async () => {
      const from = `from=${logged.id}`;
      const first = await get(`${from}&limit=2`);
      assert.equal(first.status, 200);
      assert.deepEqual(first.body, page(entries(1, 2), 2));
      assert.deepEqual((await get(`${from}&limit=2&after=2`)).body, page(entries(3, 4), 4));
      assert.deepEqual((await get(`${from}&limit=2&after=4`)).body, page(entries(5), 5));
      // Caught up: no events, and next echoes after so a poller keeps passing it.
      assert.deepEqual((await get(`${from}&limit=2&after=5`)).body, page([], 5));
      // Past the last sequence: no position parley handed out, refused rather than read on from (which would step
      // over every event up to it).
      const ahead = await get(`${from}&after=99`);
      assert.equal(ahead.status, 409);
      assert.deepEqual(
        ahead.body,
        bad(
          409,
          "after 99 is past the instance's last event (sequence 5): resume from 5 or less, or from 0 for the oldest event kept",
        ),
      );
      assert.deepEqual(
        (await get(`${from}&after=6&types=Message`)).body,
        bad(
          409,
          "after 6 is past the instance's last event (sequence 5): resume from 5 or less, or from 0 for the oldest event kept",
        ),
      );
      // A new event shows on the next poll, after the one read last.
      t.clock.advance(1000);
      const at = new Date(t.clock()).toISOString();
      await t.services.recorder.record(logged.id, message('3EB0AA0000000000000004', 'late'));
      assert.deepEqual(
        (await get(`${from}&after=5`)).body,
        page([messageEntry(logged.id, 6, at, '3EB0AA0000000000000004', 'late')], 6),
      );
      // Deleted again, as the retention would: the next tests read on past it (their next is 6).
      await t.testStore.store.db
        .deleteFrom('webhook_events')
        .where('instance_id', '=', logged.id)
        .where('sequence', '=', 6)
        .execute();
    });

    it('starts after any sequence in the middle; the instance may be named by x-instance-id', async () => {
      assert.deepEqual((await get(`from=${logged.id}&after=3`)).body, page(entries(4, 5), 6));
      assert.deepEqual(
        (await get('after=1&limit=1', { 'x-instance-id': logged.id })).body,
        page(entries(2), 2),
      );
    });

    it('each page names the instance it was read from in x-instance-id, named or picked by default', async () => {
      const named = await get(`from=${logged.id}&after=5`);
      assert.equal(named.status, 200, JSON.stringify(named.body));
      assert.equal(named.headers['x-instance-id'], logged.id);
      // A key allowed one instance: without a selector, that one is the default (docs/decisions/0002-instance-resolution.md).
      const onlyOne = await t.newKey({ scopes: ['chat:webhook'], instances: [logged.id] });
      const picked = await get('after=5', { authorization: `Bearer ${onlyOne}` });
      assert.equal(picked.status, 200, JSON.stringify(picked.body));
      assert.equal(picked.headers['x-instance-id'], logged.id);
    });

    it('types filters by event type; next still moves past the events of other types', async () => {
      const from = `from=${logged.id}`;
      assert.deepEqual((await get(`${from}&types=ReadReceipt`)).body, page(entries(2), 6));
      assert.deepEqual((await get(`${from}&types=Message,ReadReceipt&limit=2`)).body, page(entries(1, 2), 2));
      assert.deepEqual(
        (await get(`${from}&types=Message,ReadReceipt&limit=2&after=2`)).body,
        page(entries(4, 5), 5),
      );
      assert.deepEqual((await get(`${from}&types=${encodeURIComponent(' Message , Message')}`)).body, {
        ...page(entries(1, 4, 5), 6),
      });
      assert.deepEqual((await get(`${from}&types=ChatPresence&after=3`)).body, page([], 6));
      assert.deepEqual((await get(`${from}&types=Call`)).body, page([], 6));
    });

    it('400 naming the field and the rule: limit, after, types', async () => {
      const from = `from=${logged.id}`;
      const limit = bad(400, 'limit must be an integer from 1 to 1000');
      for (const value of ['0', '1001', 'ten', '2.5', '-1']) {
        const response = await get(`${from}&limit=${value}`);
        assert.equal(response.status, 400, `limit=${value}`);
        assert.deepEqual(response.body, limit, `limit=${value}`);
      }
      const afterRule = bad(400, 'after must be an integer from 0 to 9007199254740991 (a sequence number)');
      for (const value of ['-1', 'abc', '1.5', '9007199254740992']) {
        const response = await get(`${from}&after=${value}`);
        assert.equal(response.status, 400, `after=${value}`);
        assert.deepEqual(response.body, afterRule, `after=${value}`);
      }
      assert.deepEqual(
        (await get(`${from}&types=Message,Nope`)).body,
        bad(400, `types contains unknown event type Nope (allowed: ${ALLOWED})`),
      );
      assert.deepEqual(
        (await get(`${from}&types=message`)).body,
        bad(400, `types contains unknown event type message (allowed: ${ALLOWED})`),
      );
      assert.deepEqual(
        (await get(`${from}&types=Message,,ReadReceipt`)).body,
        bad(400, `types contains unknown event type "" (allowed: ${ALLOWED})`),
      );
      assert.deepEqual((await get(`${from}&types=`)).body, bad(400, 'types must not be empty'));
    });

    it('needs scope chat:webhook', async () => {
      const messagesOnly = await t.newKey({ scopes: ['chat:messages'] });
      const refused = await t.call('GET', `/v1/events?from=${logged.id}`, undefined, {
        authorization: `Bearer ${messagesOnly}`,
      });
      assert.equal(refused.status, 403);
      assert.deepEqual(refused.body, bad(403, 'API key lacks required scope chat:webhook'));
      const webhookOnly = await t.newKey({ scopes: ['chat:webhook'] });
      const allowed = await t.call('GET', `/v1/events?from=${logged.id}&limit=1`, undefined, {
        authorization: `Bearer ${webhookOnly}`,
      });
      assert.deepEqual(allowed.body, page(entries(1), 1));
    });

    it("another organization's instance is 404, and each instance has its own log", async () => {
      const db = t.testStore.store.db;
      const otherOrg = await adminCreateOrg(db, { name: `other-${dialect}`, plan: 'free' });
      const foreign = await adminCreateInstance(db, { org: otherOrg.id, env: 'test', name: 'theirs' });
      await t.services.recorder.record(foreign.id, message('3EB0BB0000000000000001', 'not yours'));
      assert.deepEqual((await get(`from=${foreign.id}`)).body, bad(404, 'instance not found'));
      assert.deepEqual((await get('', { 'x-instance-id': foreign.id })).body, bad(404, 'instance not found'));
      const theirKey = await t.newKey({ org: otherOrg.id });
      const theirs = await t.call('GET', `/v1/events?from=${logged.id}`, undefined, {
        authorization: `Bearer ${theirKey}`,
      });
      assert.deepEqual(theirs.body, bad(404, 'instance not found'));
      const own = await t.call('GET', '/v1/events', undefined, { authorization: `Bearer ${theirKey}` });
      assert.equal(own.body.data.events.length, 1);
      assert.equal(own.body.data.events[0].instanceId, foreign.id);
      assert.equal(own.body.data.events[0].event.message.conversation, 'not yours');
      // An instance of the same organization with no events: an empty log, nothing of the others.
      const quiet = await t.newInstance('test', 'quiet');
      assert.deepEqual((await get(`from=${quiet.id}`)).body, page([], 0));
    });

    it('records the events of a sandbox session with no webhook, unsubscribed types included', async () => {
      const instance = await t.newInstance('test', 'sandbox');
      await loginSandbox(t, '5511999990001', instance.id);
      const inbound = await t.call('POST', `/v1/sandbox/inbound?from=${instance.id}`, {
        phone: PEER,
        body: 'hello log',
        pushName: 'Ana',
      });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      const presence = await t.call('POST', `/v1/sandbox/presence?from=${instance.id}`, {
        phone: PEER,
        state: 'composing',
      });
      assert.equal(presence.status, 200, JSON.stringify(presence.body));
      const { data } = (await get(`from=${instance.id}`)).body;
      assert.deepEqual(
        data.events.map((e: { sequence: number; type: string }) => [e.sequence, e.type]),
        [
          [1, 'SessionStatus'],
          [2, 'SessionStatus'],
          [3, 'HistorySync'],
          [4, 'Message'],
          [5, 'ChatPresence'],
        ],
      );
      assert.equal(data.next, 5);
      assert.deepEqual(
        data.events.slice(0, 2).map((e: { event: { status: string } }) => e.event.status),
        ['qr', 'connected'],
      );
      assert.equal(data.events[3].event.info.id, inbound.body.data.id);
      const deliveries = await t.testStore.store.db
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('instance_id', '=', instance.id)
        .execute();
      assert.deepEqual(deliveries, [], 'no delivery to nowhere');
    });
  });
}
