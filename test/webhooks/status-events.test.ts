import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { EVENT_TYPES } from '../../src/domain/instance.ts';
import { updateInstance } from '../../src/store/instances.ts';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, bodies, configureWebhook, createWebhookApp, waitForLog } from './support.ts';

/**
 * The SessionStatus and MessageStatus webhook events (docs/api.md "Events",
 * docs/decisions/0012-session-and-message-status-events.md): subscribing to every type, a sandbox session's
 * statuses at a real HTTPS receiver with their exact bodies, and a send's final status recorded through the
 * EventRecorder, stored and delivered.
 */

/** Every type, written out so the test pins the canonical order with the two status events last. */
const ALL = [
  'Message',
  'ReadReceipt',
  'HistorySync',
  'ChatPresence',
  'MessageUpdate',
  'GroupUpdate',
  'Call',
  'PollVote',
  'SessionStatus',
  'MessageStatus',
];
const OWN = '5511999990001';

for (const dialect of testDialects()) {
  describe(`SessionStatus and MessageStatus webhook events (${dialect})`, () => {
    let receiver: Receiver;
    let t: TestApp;
    beforeEach(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({ dialect });
    });
    afterEach(async () => {
      await t.close();
      await receiver.close();
    });

    const call = async (method: 'GET' | 'POST', path: string, body?: unknown) => {
      const response = await t.call(method, path, body);
      assert.equal(response.status, 200, `${path}: ${JSON.stringify(response.body)}`);
      return response.body.data;
    };

    it('subscribes to every event type; an unknown one is 400 naming the allowed list', async () => {
      assert.deepEqual(EVENT_TYPES, ALL);
      const unknown = await t.call('POST', '/v1/session/connect', { subscribe: [...ALL, 'Typing'] });
      assert.deepEqual(unknown.body, {
        error: {
          code: 400,
          message: `subscribe contains unknown event type Typing (allowed: ${ALL.join(', ')})`,
        },
      });
      const connected = await call('POST', '/v1/session/connect', { subscribe: [...ALL].reverse() });
      assert.equal(connected.events, ALL.join(','));
      assert.deepEqual((await call('GET', '/v1/webhook')).subscribe, ALL);
      // A later connect without subscribe keeps all of them; the default stays the four.
      assert.equal((await call('POST', '/v1/session/connect', {})).events, ALL.join(','));
      const other = await t.newInstance('test', 'default');
      const first = await call('POST', `/v1/session/connect?from=${other.id}`, {});
      assert.equal(first.events, 'Message,ReadReceipt,HistorySync,ChatPresence');
    });

    it('delivers a sandbox session’s statuses: qr, connected, disconnected, connected, logged_out', async () => {
      await configureWebhook(t, receiver.url);
      const at = () => new Date(t.clock()).toISOString();
      const times: string[] = [];
      await call('POST', '/v1/session/connect', { subscribe: ['SessionStatus'] });
      times.push(at());
      t.clock.advance(1_000);
      await call('POST', '/v1/sandbox/scan', { phone: OWN });
      times.push(at());
      t.clock.advance(1_000);
      await call('POST', '/v1/session/disconnect');
      times.push(at());
      t.clock.advance(1_000);
      await call('POST', '/v1/session/connect', {});
      times.push(at());
      t.clock.advance(1_000);
      await call('POST', '/v1/session/logout');
      times.push(at());
      // A second logout changes nothing, so it reports nothing.
      await t.call('POST', '/v1/session/logout');

      const got = await receiver.waitForCount(5, 10_000);
      for (const request of got) assertSigned(request);
      const instanceId = t.instance.id;
      assert.deepEqual(bodies(got), [
        { type: 'SessionStatus', event: { status: 'qr', at: times[0] }, instanceId, sequence: 1 },
        { type: 'SessionStatus', event: { status: 'connected', at: times[1] }, instanceId, sequence: 2 },
        // 3: the scan's HistorySync, not subscribed.
        { type: 'SessionStatus', event: { status: 'disconnected', at: times[2] }, instanceId, sequence: 4 },
        { type: 'SessionStatus', event: { status: 'connected', at: times[3] }, instanceId, sequence: 5 },
        { type: 'SessionStatus', event: { status: 'logged_out', at: times[4] }, instanceId, sequence: 6 },
      ]);
      const log = await waitForLog(t, (e) => e.filter((x) => x.status === 'delivered').length === 5);
      assert.deepEqual(
        log.map((e) => [e.sequence, e.type, e.status]),
        [
          [6, 'SessionStatus', 'delivered'],
          [5, 'SessionStatus', 'delivered'],
          [4, 'SessionStatus', 'delivered'],
          [3, 'HistorySync', 'unsent'],
          [2, 'SessionStatus', 'delivered'],
          [1, 'SessionStatus', 'delivered'],
        ],
      );
      assert.equal(receiver.requests.length, 5, 'nothing else was sent');
    });

    it('records a send’s MessageStatus through the EventRecorder: stored body and delivery', async () => {
      await configureWebhook(t, receiver.url);
      await updateInstance(t.testStore.store.db, t.instance.id, { subscribe: ['MessageStatus'] });
      const at = Date.UTC(2025, 6, 1, 9, 30, 0, 250);
      await t.services.recorder.record(t.instance.id, {
        type: 'messageStatus',
        id: '3EB0AAAA0000000000000001',
        status: 'sent',
        at,
      });
      await t.services.recorder.record(t.instance.id, {
        type: 'messageStatus',
        id: '3EB0AAAA0000000000000002',
        status: 'failed',
        error: 'not registered on WhatsApp: 5511900000000',
        at: at + 1,
      });
      await t.services.recorder.record(t.instance.id, {
        type: 'messageStatus',
        id: '3EB0AAAA0000000000000003',
        status: 'canceled',
        at: at + 2,
      });
      const instanceId = t.instance.id;
      const expected = [
        {
          type: 'MessageStatus',
          event: { id: '3EB0AAAA0000000000000001', status: 'sent', at: '2025-07-01T09:30:00.250Z' },
          instanceId,
          sequence: 1,
        },
        {
          type: 'MessageStatus',
          event: {
            id: '3EB0AAAA0000000000000002',
            status: 'failed',
            error: 'not registered on WhatsApp: 5511900000000',
            at: '2025-07-01T09:30:00.251Z',
          },
          instanceId,
          sequence: 2,
        },
        {
          type: 'MessageStatus',
          event: { id: '3EB0AAAA0000000000000003', status: 'canceled', at: '2025-07-01T09:30:00.252Z' },
          instanceId,
          sequence: 3,
        },
      ];
      const rows = await t.testStore.store.db
        .selectFrom('webhook_events')
        .select(['sequence', 'type', 'payload', 'skip_reason'])
        .where('instance_id', '=', instanceId)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        rows.map((row) => [Number(row.sequence), row.type, row.skip_reason]),
        [
          [1, 'MessageStatus', null],
          [2, 'MessageStatus', null],
          [3, 'MessageStatus', null],
        ],
      );
      assert.deepEqual(
        rows.map((row) => row.payload),
        expected.map((body) => JSON.stringify(body)),
        'the stored body is the exact text sent, keys in order',
      );
      const got = await receiver.waitForCount(3, 10_000);
      for (const request of got) assertSigned(request);
      assert.deepEqual(
        got.map((request) => request.body.toString('utf8')),
        rows.map((row) => row.payload),
      );
      const log = await waitForLog(t, (e) => e.length === 3 && e.every((x) => x.status === 'delivered'));
      assert.deepEqual(
        log.map((e) => [e.sequence, e.type, e.payload.event.status]),
        [
          [3, 'MessageStatus', 'canceled'],
          [2, 'MessageStatus', 'failed'],
          [1, 'MessageStatus', 'sent'],
        ],
      );
    });

    it('keeps both status types off by default: recorded for the log, not sent', async () => {
      await configureWebhook(t, receiver.url);
      await call('POST', '/v1/session/connect', {});
      await t.services.recorder.record(t.instance.id, {
        type: 'messageStatus',
        id: '3EB0AAAA0000000000000009',
        status: 'sent',
        at: t.clock(),
      });
      const log = await waitForLog(t, (e) => e.length === 2);
      assert.deepEqual(
        log.map((e) => [e.sequence, e.type, e.status, e.reason]),
        [
          [2, 'MessageStatus', 'unsent', 'event type MessageStatus is not subscribed'],
          [1, 'SessionStatus', 'unsent', 'event type SessionStatus is not subscribed'],
        ],
      );
      assert.equal(receiver.requests.length, 0);
    });
  });
}
