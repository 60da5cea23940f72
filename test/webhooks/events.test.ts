import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, bodies, configureWebhook, createWebhookApp, waitForLog } from './support.ts';

const OWN = '5511999990001';
const PEER = '5511988880002';
const ownJid = `${OWN}@s.whatsapp.net`;
const peerJid = `${PEER}@s.whatsapp.net`;

/**
 * Connects with `subscribe` (omitted: the default of docs/decisions/0016-session-lifecycle.md), sets the webhook,
 * then scans (a HistorySync follows).
 */
async function connectAndScan(t: TestApp, url: string, subscribe?: string[]) {
  const connect = await t.call('POST', '/v1/session/connect', subscribe ? { subscribe } : {});
  assert.equal(connect.status, 200, JSON.stringify(connect.body));
  await configureWebhook(t, url);
  const scan = await t.call('POST', '/v1/sandbox/scan', { phone: OWN });
  assert.equal(scan.status, 200, JSON.stringify(scan.body));
  return connect.body.data;
}

async function ok(t: TestApp, path: string, body: unknown) {
  const response = await t.call('POST', path, body);
  assert.equal(response.status, 200, `${path}: ${JSON.stringify(response.body)}`);
  return response.body.data;
}

for (const dialect of testDialects()) {
  describe(`webhook events through HTTP (${dialect})`, () => {
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

    it('sends all four event types from the sandbox, signed, in sequence order, with the payloads of docs/decisions/0018-webhook-events-and-payloads.md', async () => {
      const connected = await connectAndScan(t, receiver.url);
      assert.equal(connected.events, 'Message,ReadReceipt,HistorySync,ChatPresence');
      const sent = await ok(t, '/v1/messages/send', { phone: PEER, body: 'hello from parley' });
      const inbound = await ok(t, '/v1/sandbox/inbound', { phone: PEER, body: 'hi back', pushName: 'Peer' });
      await ok(t, '/v1/sandbox/receipt', { id: sent.id, state: 'read' });
      await ok(t, '/v1/sandbox/presence', { phone: PEER, state: 'recording' });
      await ok(t, '/v1/sandbox/presence', { phone: PEER, state: 'paused' });
      const got = await receiver.waitForCount(6, 10_000);
      for (const request of got) assertSigned(request);
      const events = bodies(got);
      assert.deepEqual(
        events.map((e) => [e.sequence, e.type]),
        // 1 and 2 are the session's SessionStatus events (qr, connected), not subscribed by default.
        // A synchronous send records no MessageStatus (its answer is the outcome): the sequence has no gap.
        [
          [3, 'HistorySync'],
          [4, 'Message'],
          [5, 'Message'],
          [6, 'ReadReceipt'],
          [7, 'ChatPresence'],
          [8, 'ChatPresence'],
        ],
      );
      const [history, own, incoming, receipt, recording, paused] = events;
      const base = { instanceId: t.instance.id };
      assert.deepEqual(history, {
        type: 'HistorySync',
        event: { syncType: 'INITIAL_BOOTSTRAP', progress: 100, chats: [] },
        ...base,
        sequence: 3,
      });
      assert.deepEqual(own, {
        type: 'Message',
        event: {
          info: {
            id: sent.id,
            messageSource: { chat: peerJid, sender: ownJid, isFromMe: true, isGroup: false },
            pushName: 'Sandbox 0001',
            timestamp: sent.timestamp,
          },
          message: { conversation: 'hello from parley' },
        },
        ...base,
        sequence: 4,
      });
      assert.deepEqual(incoming, {
        type: 'Message',
        event: {
          info: {
            id: inbound.id,
            messageSource: { chat: peerJid, sender: peerJid, isFromMe: false, isGroup: false },
            pushName: 'Peer',
            timestamp: new Date(t.clock()).toISOString(),
          },
          message: { conversation: 'hi back' },
        },
        ...base,
        sequence: 5,
      });
      assert.deepEqual(receipt, {
        type: 'ReadReceipt',
        state: 'Read',
        event: {
          messageIds: [sent.id],
          messageSource: { chat: peerJid, sender: peerJid, isFromMe: false, isGroup: false },
          timestamp: new Date(t.clock()).toISOString(),
        },
        ...base,
        sequence: 6,
      });
      const presenceSource = { chat: peerJid, sender: peerJid, isFromMe: false, isGroup: false };
      assert.deepEqual(recording, {
        type: 'ChatPresence',
        event: { messageSource: presenceSource, state: 'composing', media: 'audio' },
        ...base,
        sequence: 7,
      });
      assert.deepEqual(paused, {
        type: 'ChatPresence',
        event: { messageSource: presenceSource, state: 'paused', media: '' },
        ...base,
        sequence: 8,
      });
      // Every event has its own id, reused by the log.
      const ids = got.map((r) => r.headers['webhook-id']);
      assert.equal(new Set(ids).size, 6);
      const log = await waitForLog(
        t,
        (e) => e.length === 8 && e.filter((x) => x.status === 'delivered').length === 6,
      );
      assert.deepEqual(
        log.filter((e) => e.status === 'delivered').map((e) => e.id),
        [...ids].reverse(),
      );
      assert.deepEqual(
        log.filter((e) => e.status !== 'delivered').map((e) => [e.sequence, e.type, e.status, e.reason]),
        [
          [2, 'SessionStatus', 'unsent', 'event type SessionStatus is not subscribed'],
          [1, 'SessionStatus', 'unsent', 'no webhook URL configured'],
        ],
      );
    });

    it('sends only subscribed types; the others are logged as unsent', async () => {
      const connected = await connectAndScan(t, receiver.url, ['Message', 'ReadReceipt']);
      assert.equal(connected.events, 'Message,ReadReceipt');
      const config = await t.call('GET', '/v1/webhook');
      assert.deepEqual(config.body.data.subscribe, ['Message', 'ReadReceipt']);
      await ok(t, '/v1/sandbox/presence', { phone: PEER, state: 'composing' });
      const sent = await ok(t, '/v1/messages/send', { phone: PEER, body: 'one' });
      await ok(t, '/v1/sandbox/receipt', { id: sent.id, state: 'delivered' });
      const log = await waitForLog(
        t,
        (e) => e.length === 6 && e.filter((x) => x.status === 'delivered').length === 2,
      );
      assert.deepEqual(
        log.map((e) => [e.sequence, e.type, e.status, e.reason]),
        [
          [6, 'ReadReceipt', 'delivered', null],
          [5, 'Message', 'delivered', null],
          [4, 'ChatPresence', 'unsent', 'event type ChatPresence is not subscribed'],
          [3, 'HistorySync', 'unsent', 'event type HistorySync is not subscribed'],
          [2, 'SessionStatus', 'unsent', 'event type SessionStatus is not subscribed'],
          [1, 'SessionStatus', 'unsent', 'no webhook URL configured'],
        ],
      );
      assert.deepEqual(
        bodies(receiver.requests).map((e) => [e.sequence, e.type, e.state]),
        [
          [5, 'Message', undefined],
          [6, 'ReadReceipt', 'Delivered'],
        ],
      );
      // A later connect without subscribe keeps the stored list (docs/decisions/0016-session-lifecycle.md).
      const again = await t.call('POST', '/v1/session/connect', {});
      assert.equal(again.body.data.events, 'Message,ReadReceipt');
    });

    it('delivers many events to one URL in sequence order', async () => {
      await connectAndScan(t, receiver.url);
      for (let i = 1; i <= 12; i++) await ok(t, '/v1/sandbox/inbound', { phone: PEER, body: `n${i}` });
      const got = await receiver.waitForCount(13, 15_000);
      assert.deepEqual(
        bodies(got).map((e) => e.sequence),
        Array.from({ length: 13 }, (_, i) => i + 3),
      );
      assert.deepEqual(
        bodies(got)
          .slice(1)
          .map((e) => e.event.message.conversation),
        Array.from({ length: 12 }, (_, i) => `n${i + 1}`),
      );
    });
  });
}
