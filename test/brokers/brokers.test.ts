import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import type { TestApp } from '../support/app.ts';
import {
  AMQP_URL,
  amqpQueue,
  brokersConfigured,
  NATS_URL,
  natsStream,
  restartNats,
  restartRabbitMq,
} from '../support/brokers.ts';
import { testDialects } from '../support/store.ts';
import { createWebhookApp, textMessage } from '../webhooks/support.ts';

/**
 * Retries every half second for two minutes: longer than a broker restart may take (the restart helpers wait 90 s
 * for the broker; on a loaded machine RabbitMQ has taken more than 30 s to come back).
 */
const PATIENT_SCHEDULE = Array.from({ length: 240 }, () => '0.5').join(',');

/** A name no other test uses (exchanges are shared by the whole broker). */
function unique(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2)}`;
}

/** Creates an endpoint through the API, asserting 201. */
async function createEndpoint(t: TestApp, body: Record<string, unknown>) {
  const response = await t.call('POST', '/v1/webhooks', body);
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.data as { id: string; url: string; secret: string };
}

/** The endpoint's delivery log (newest first). */
async function endpointLog(t: TestApp, id: string): Promise<any[]> {
  const response = await t.call('GET', `/v1/webhooks/${id}/deliveries?limit=100`);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.data.deliveries;
}

/** A delivery of the endpoint as its rows say: status and the errors of its attempts, oldest first. */
interface DeliveryRow {
  eventId: string;
  status: string;
  errors: (string | null)[];
}

/** The endpoint's deliveries straight from the store (polling the API would meet the plan's rate limit). */
async function deliveryRows(t: TestApp, endpointId: string): Promise<DeliveryRow[]> {
  const db = t.services.store.db;
  const deliveries = await db
    .selectFrom('webhook_deliveries')
    .select(['event_id', 'status'])
    .where('endpoint_id', '=', endpointId)
    .orderBy('sequence')
    .execute();
  const attempts = await db
    .selectFrom('webhook_attempts')
    .select(['event_id', 'error'])
    .where('endpoint_id', '=', endpointId)
    .orderBy('number')
    .execute();
  return deliveries.map((d) => ({
    eventId: d.event_id,
    status: d.status,
    errors: attempts.filter((a) => a.event_id === d.event_id).map((a) => a.error),
  }));
}

/**
 * Polls the endpoint's deliveries until `predicate` holds, waking the worker each time; fails after `timeoutMs`.
 * @returns the endpoint's delivery log as the API answers it then (newest first).
 */
async function waitForEndpointLog(
  t: TestApp,
  id: string,
  what: string,
  predicate: (rows: DeliveryRow[]) => boolean,
  timeoutMs = 20_000,
): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  let rows: DeliveryRow[] = [];
  while (Date.now() < deadline) {
    rows = await deliveryRows(t, id);
    if (predicate(rows)) return endpointLog(t, id);
    t.services.webhooks.wake();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const pending = rows.filter((row) => row.status !== 'delivered');
  assert.fail(
    `not met within ${timeoutMs} ms: ${what}; ${rows.length} deliveries, not delivered: ${JSON.stringify(pending.slice(0, 3))}`,
  );
}

/**
 * Records an inbound text message every 20 ms until `work` ends (a broker restart: events keep coming while the
 * broker is down). @returns how many were recorded.
 */
async function recordWhile(t: TestApp, work: Promise<void>): Promise<number> {
  let done = false;
  const finished = work.finally(() => {
    done = true;
  });
  let count = 0;
  while (!done) {
    count += 1;
    await t.services.recorder.record(t.instance.id, textMessage(`during${count}`));
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await finished;
  return count;
}

/**
 * Records 10 messages, waits for the first delivery, records a message every 20 ms while `restart` runs, records 10
 * more, and waits (60 s at most) until every one was delivered to endpoint `endpointId`; asserts some attempt failed
 * while the broker was down.
 * @returns the endpoint's deliveries in sequence order.
 */
async function throughRestart(
  t: TestApp,
  endpointId: string,
  restart: () => Promise<void>,
): Promise<DeliveryRow[]> {
  await record(t, 10, 'before');
  await waitForEndpointLog(t, endpointId, 'the first events delivered', (rows) =>
    rows.some((row) => row.status === 'delivered'),
  );
  const during = await recordWhile(t, restart());
  await record(t, 10, 'after');
  const total = 10 + during + 10;
  await waitForEndpointLog(
    t,
    endpointId,
    'every event delivered',
    (rows) => allDelivered(rows, total),
    60_000,
  );
  const rows = await deliveryRows(t, endpointId);
  assert.ok(
    rows.some((row) => row.errors.length > 1),
    'some attempt failed while the broker was down',
  );
  return rows;
}

/** True when there are `count` deliveries, all delivered. */
function allDelivered(rows: DeliveryRow[], count: number): boolean {
  return rows.length === count && rows.every((row) => row.status === 'delivered');
}

/** The stored webhook bodies of the instance's events, by event id. */
async function payloads(t: TestApp): Promise<Map<string, string>> {
  const rows = await t.services.store.db
    .selectFrom('webhook_events')
    .select(['id', 'payload'])
    .where('instance_id', '=', t.instance.id)
    .execute();
  return new Map(rows.map((row) => [row.id, row.payload]));
}

/** Asserts a message's Standard Webhooks headers verify `body` under `secret`, recomputed with node:crypto too. */
function assertSigned(headers: Record<string, string>, body: string, secret: string): void {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const id = headers['webhook-id'] ?? '';
  const timestamp = headers['webhook-timestamp'] ?? '';
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  assert.equal(headers['webhook-signature'], `v1,${mac}`);
  new Webhook(secret).verify(body, {
    'webhook-id': id,
    'webhook-timestamp': timestamp,
    'webhook-signature': headers['webhook-signature'] ?? '',
  });
}

/** Records `count` inbound text messages `<prefix>1…` on the test instance. */
async function record(t: TestApp, count: number, prefix: string): Promise<void> {
  for (let i = 1; i <= count; i++)
    await t.services.recorder.record(t.instance.id, textMessage(`${prefix}${i}`));
}

for (const dialect of brokersConfigured() ? testDialects() : []) {
  describe(`broker endpoints (${dialect})`, () => {
    let t: TestApp;
    const cleanups: (() => Promise<void>)[] = [];
    let ticker: NodeJS.Timeout | undefined;
    beforeEach(async () => {
      t = await createWebhookApp({ dialect, env: { WEBHOOK_RETRY_SCHEDULE: PATIENT_SCHEDULE } });
      // The test app's clock moves by hand: here it follows real time, so retries come due as a broker recovers.
      ticker = setInterval(() => t.clock.set(Math.max(t.clock(), Date.now())), 20);
    });
    afterEach(async () => {
      clearInterval(ticker);
      await t.close();
      for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => {});
    });

    it('RabbitMQ: each subscribed event persistent and confirmed, routed parley.<instance>.<Type>, signed', async () => {
      const exchange = unique('parley-test');
      const queue = await amqpQueue(exchange, `parley.${t.instance.id}.#`);
      cleanups.push(() => queue.remove());
      const endpoint = await createEndpoint(t, {
        url: `${AMQP_URL}/?exchange=${exchange}`,
        events: ['Message'],
      });
      await record(t, 3, 'rabbit');
      await t.services.recorder.record(t.instance.id, {
        type: 'receipt',
        state: 'read',
        messageIds: ['X'],
        source: { chat: '1@s.whatsapp.net', sender: '1@s.whatsapp.net', isFromMe: false, isGroup: false },
        timestamp: Date.UTC(2025, 0, 2),
      });
      const log = await waitForEndpointLog(t, endpoint.id, '3 delivered', (rows) => allDelivered(rows, 3));
      for (const entry of log) {
        assert.equal(entry.reason, null, 'the default webhook has no URL: not a reason in the endpoint log');
        assert.equal(entry.attempts.length, 1);
        assert.equal(entry.attempts[0].statusCode, null);
        assert.equal(entry.attempts[0].responseBody, `confirmed by RabbitMQ (exchange ${exchange})`);
        assert.equal(
          entry.attempts[0].url,
          `${AMQP_URL.replace(/:[^:@/]+@/, ':****@')}/?exchange=${exchange}`,
        );
      }
      const messages = await queue.drain();
      const bodies = await payloads(t);
      assert.deepEqual(
        messages.map((m) => m.messageId),
        [...log].reverse().map((entry) => entry.id),
      );
      for (const message of messages) {
        assert.equal(message.routingKey, `parley.${t.instance.id}.Message`);
        assert.equal(message.type, 'Message');
        assert.equal(message.deliveryMode, 2);
        assert.equal(message.contentType, 'application/json');
        assert.equal(message.body, bodies.get(message.messageId ?? ''));
        assert.equal(message.headers['webhook-id'], message.messageId);
        assertSigned(message.headers, message.body, endpoint.secret);
      }
      assert.deepEqual(
        messages.map((m) => JSON.parse(m.body).event.message.conversation),
        ['rabbit1', 'rabbit2', 'rabbit3'],
      );
    });

    it('RabbitMQ: a message no queue takes fails its attempt and is retried until a queue is bound', async () => {
      const exchange = unique('parley-unbound');
      const endpoint = await createEndpoint(t, {
        url: `${AMQP_URL}/?exchange=${exchange}`,
        events: ['Message'],
      });
      await record(t, 1, 'unrouted');
      const subject = `parley.${t.instance.id}.Message`;
      const unroutable = `no queue is bound to routing key ${subject} on exchange ${exchange}: the broker returned the message`;
      await waitForEndpointLog(t, endpoint.id, 'an unroutable attempt', (rows) =>
        rows.some((row) => row.errors.includes(unroutable)),
      );
      const queue = await amqpQueue(exchange, `parley.${t.instance.id}.*`);
      cleanups.push(() => queue.remove());
      await waitForEndpointLog(t, endpoint.id, 'delivered', (rows) => allDelivered(rows, 1));
      const messages = await queue.drain();
      assert.equal(messages.length, 1);
      assert.equal(JSON.parse(messages[0]?.body ?? '{}').event.message.conversation, 'unrouted1');
    });

    it('NATS: JetStream-acknowledged publish on parley.<instance>.<Type> with Nats-Msg-Id, signed', async () => {
      const stream = await natsStream([`parley.${t.instance.id}.>`]);
      cleanups.push(() => stream.remove());
      const endpoint = await createEndpoint(t, { url: NATS_URL, events: ['Message'] });
      await record(t, 3, 'nats');
      const log = await waitForEndpointLog(t, endpoint.id, '3 delivered', (rows) => allDelivered(rows, 3));
      const ordered = [...log].reverse();
      ordered.forEach((entry, index) => {
        assert.equal(
          entry.attempts[0].responseBody,
          `stored in JetStream stream ${stream.name} as message ${index + 1}`,
        );
      });
      const stored = await stream.read();
      const bodies = await payloads(t);
      assert.deepEqual(
        stored.map((m) => m.header?.get('Nats-Msg-Id')),
        ordered.map((entry) => entry.id),
      );
      for (const message of stored) {
        const body = new TextDecoder().decode(message.data);
        const id = message.header?.get('Nats-Msg-Id') ?? '';
        assert.equal(message.subject, `parley.${t.instance.id}.Message`);
        assert.equal(body, bodies.get(id));
        const headers = Object.fromEntries(
          ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'content-type'].map((name) => [
            name,
            message.header?.get(name) ?? '',
          ]),
        );
        assert.equal(headers['webhook-id'], id);
        assert.equal(headers['content-type'], 'application/json');
        assertSigned(headers, body, endpoint.secret);
      }
    });

    it('NATS: a subject no stream captures fails its attempt and is retried until a stream exists', async () => {
      const endpoint = await createEndpoint(t, { url: NATS_URL, events: ['Message'] });
      await record(t, 1, 'nostream');
      const subject = `parley.${t.instance.id}.Message`;
      await waitForEndpointLog(t, endpoint.id, 'a failed attempt', (rows) =>
        rows.some((row) => row.errors.includes(`no JetStream stream captures subject ${subject}`)),
      );
      const stream = await natsStream([`parley.${t.instance.id}.>`]);
      cleanups.push(() => stream.remove());
      await waitForEndpointLog(t, endpoint.id, 'delivered', (rows) => allDelivered(rows, 1));
      assert.equal((await stream.read()).length, 1);
    });

    it('RabbitMQ restarted mid-stream: every event arrives', async () => {
      const exchange = unique('parley-restart');
      const queue = await amqpQueue(exchange, `parley.${t.instance.id}.#`);
      cleanups.push(() => queue.remove());
      const endpoint = await createEndpoint(t, {
        url: `${AMQP_URL}/?exchange=${exchange}`,
        events: ['Message'],
      });
      const rows = await throughRestart(t, endpoint.id, restartRabbitMq);
      assertAllArrived(
        (await queue.drain()).map((m) => m.messageId ?? ''),
        rows,
      );
    });

    it('NATS killed and restarted mid-stream: every event stored once', async () => {
      const stream = await natsStream([`parley.${t.instance.id}.>`]);
      cleanups.push(() => stream.remove());
      const endpoint = await createEndpoint(t, { url: NATS_URL, events: ['Message'] });
      const rows = await throughRestart(t, endpoint.id, restartNats);
      const ids = (await stream.read()).map((m) => m.header?.get('Nats-Msg-Id') ?? '');
      // JetStream's duplicate window keeps a retried publish once: each event exactly once.
      assert.equal(ids.length, rows.length);
      assertAllArrived(ids, rows);
    });
  });
}

/**
 * Asserts every delivery's event arrived, none other, and in order as far as the outbox promises it
 * (docs/decisions/0005-outbox-and-delivery.md: started one at a time in sequence order, a failed event whose retry is
 * not due does not hold back later ones): the events published on their first attempt arrived in sequence order.
 * Repeats are allowed here (RabbitMQ: a publish whose confirm was lost with the connection is published again; at
 * least once, deduplicated on `message-id`).
 */
function assertAllArrived(received: string[], rows: DeliveryRow[]): void {
  assert.deepEqual(new Set(received), new Set(rows.map((row) => row.eventId)));
  const firstTry = rows.filter((row) => row.errors.length === 1).map((row) => row.eventId);
  const arrivalOrder = received.filter((id, index) => received.indexOf(id) === index);
  assert.deepEqual(
    arrivalOrder.filter((id) => firstTry.includes(id)),
    firstTry,
  );
}
