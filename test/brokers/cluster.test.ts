import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { afterEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect as amqpConnect } from 'amqplib';
import { type Cluster, FAILOVER_BOUND_MS, owners, startCluster, stopAll } from '../nodes/support.ts';
import { AMQP_URL, amqpQueue, brokersConfigured, NATS_URL, natsStream } from '../support/brokers.ts';
import { testDialects } from '../support/store.ts';
import { type Child, PEER, until } from '../webhooks/child.ts';

/**
 * Broker endpoints (docs/decisions/0037-broker-endpoints.md) on several nodes (docs/decisions/0008-leases-and-fencing.md):
 * three parley processes sharing one PostgreSQL schema, six sandbox instances spread across them, each instance
 * with a RabbitMQ endpoint and a NATS JetStream endpoint created through the API of various nodes. Inbound
 * messages arrive on every instance, then one node is killed with SIGKILL while a second batch is being recorded
 * and delivered (its instances fail over and receive their second batch through the survivors). Without waking
 * anything, the nodes' own workers drain the shared outbox, and what the brokers really hold is read back: every
 * Message event of every instance is in the RabbitMQ queue at least once and in the JetStream stream exactly once
 * (the duplicate window drops a publish the dead node made but could not record), with the stored body, the routing
 * key or subject `parley.<instanceId>.Message` and a Standard Webhooks signature by that endpoint's secret; and
 * more than one node made the attempts (the outbox is shared, not per owner).
 */

/** Inbound messages per instance before the kill, and in the batch during and after it. */
const FIRST = 4;
const SECOND = 8;

/** How long the nodes' workers get to deliver everything, ms (a loaded two-core machine). */
const DELIVERY_TIMEOUT_MS = 90_000;

/** A name no other test uses (exchanges and stream subjects are shared by the whole broker). */
function unique(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2)}`;
}

/** A broker endpoint as created: its id, instance and secret. */
interface Endpoint {
  id: string;
  instanceId: string;
  secret: string;
}

/** Creates an endpoint of `instanceId` through `node`, asserting 201. */
async function createEndpoint(node: Child, key: string, instanceId: string, url: string): Promise<Endpoint> {
  const response = await node.call('POST', `/v1/webhooks?from=${instanceId}`, key, {
    url,
    events: ['Message'],
  });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  const data = response.body.data as { id: string; secret: string };
  return { id: data.id, instanceId, secret: data.secret };
}

/** One inbound message on `instanceId` through `node`; resolves with the answer's status (0: no answer). */
async function inbound(node: Child, key: string, instanceId: string, text: string): Promise<number> {
  const response = await node
    .call('POST', `/v1/sandbox/inbound?from=${instanceId}`, key, { phone: PEER, body: text })
    .catch(() => ({ status: 0 }));
  return response.status;
}

/**
 * One inbound message on `instanceId` through `node()` (asked again at each try), asked again until it is answered
 * 200: an instance whose lease moves (a failover, or a renewal late on a loaded machine) answers 503 until its new
 * owner restored the session. Counts each refusal in `refused`.
 */
async function inboundAccepted(
  node: () => Child,
  key: string,
  instanceId: string,
  text: string,
  refused: { count: number },
): Promise<void> {
  await until(
    async () => {
      if ((await inbound(node(), key, instanceId, text)) === 200) return true;
      refused.count += 1;
      return false;
    },
    FAILOVER_BOUND_MS + 15_000,
    `${text} on ${instanceId}`,
  );
}

/** Asserts Standard Webhooks headers sign `body` under `secret`, recomputed with node:crypto. */
function assertSigned(headers: Record<string, string>, body: string, secret: string, what: string): void {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const id = headers['webhook-id'] ?? '';
  const timestamp = headers['webhook-timestamp'] ?? '';
  assert.match(timestamp, /^\d+$/, `${what}: webhook-timestamp`);
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  assert.equal(headers['webhook-signature'], `v1,${mac}`, `${what}: signature`);
}

for (const dialect of brokersConfigured() ? testDialects().filter((d) => d === 'postgres') : []) {
  describe(`broker endpoints on three nodes (${dialect}): a node killed`, () => {
    const clusters: Cluster[] = [];
    const cleanups: (() => Promise<void>)[] = [];
    // The nodes stop before the broker objects go: a node still retrying would declare the exchange again.
    afterEach(async () => {
      for (const cluster of clusters.splice(0)) await stopAll(cluster);
      for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => {});
    });

    it('every Message event reaches RabbitMQ at least once and JetStream exactly once, signed', async (t) => {
      const cluster = await startCluster();
      clusters.push(cluster);
      const { key, instanceIds, nodes } = cluster;
      const db = cluster.testStore.store.db;

      const exchange = unique('parley-cluster');
      const queue = await amqpQueue(exchange, 'parley.*.Message');
      cleanups.push(async () => {
        await queue.remove();
        const connection = await amqpConnect(AMQP_URL);
        await (await connection.createChannel()).deleteExchange(exchange);
        await connection.close();
      });
      const stream = await natsStream(instanceIds.map((id) => `parley.${id}.>`));
      cleanups.push(() => stream.remove());

      // Two endpoints per instance, each created through a different node than the other.
      const amqpEndpoints: Endpoint[] = [];
      const natsEndpoints: Endpoint[] = [];
      for (const [i, instanceId] of instanceIds.entries()) {
        const first = nodes[i % nodes.length];
        const second = nodes[(i + 1) % nodes.length];
        assert.ok(first && second);
        amqpEndpoints.push(await createEndpoint(first, key, instanceId, `${AMQP_URL}/?exchange=${exchange}`));
        natsEndpoints.push(await createEndpoint(second, key, instanceId, NATS_URL));
      }
      const endpointIds = [...amqpEndpoints, ...natsEndpoints].map((endpoint) => endpoint.id);

      const placed = await owners(cluster);
      const ownerOf = (instanceId: string) => {
        const owner = nodes.find((node) => node.workerId === placed.get(instanceId));
        assert.ok(owner, `${instanceId} is held by a node`);
        return owner;
      };

      // The first batch: every instance, through its owner.
      const refused = { count: 0 };
      await Promise.all(
        instanceIds.map(async (id) => {
          for (let i = 1; i <= FIRST; i++)
            await inboundAccepted(() => ownerOf(id), key, id, `first ${i}`, refused);
        }),
      );

      // The second batch on the survivors' instances, one message at a time, while a node is killed.
      const [victim, ...survivors] = nodes;
      assert.ok(victim && survivors.length === 2);
      const victimInstances = instanceIds.filter((id) => placed.get(id) === victim.workerId);
      const survivorInstances = instanceIds.filter((id) => placed.get(id) !== victim.workerId);
      assert.ok(victimInstances.length > 0, 'the victim holds instances');
      let sentSecond = 0;
      const sending = Promise.all(
        survivorInstances.map(async (id) => {
          for (let i = 1; i <= SECOND; i++) {
            await inboundAccepted(() => ownerOf(id), key, id, `second ${i}`, refused);
            sentSecond += 1;
          }
        }),
      );
      await until(async () => sentSecond >= survivorInstances.length, 30_000, 'the second batch under way');
      // The kill comes as soon as the victim is seen publishing (an attempt of its open in the store), so that it
      // dies mid-publish when it can; after 5 s, or once the batch is sent, it comes anyway.
      const inFlight = () =>
        db
          .selectFrom('webhook_attempts')
          .select('id')
          .where('endpoint_id', 'in', endpointIds)
          .where('worker', '=', victim.workerId)
          .where('finished_at', 'is', null)
          .executeTakeFirst();
      let sent = false;
      const done = () => {
        sent = true;
      };
      sending.then(done, done);
      const watchUntil = Date.now() + 5000;
      let midPublish = false;
      while (!sent && Date.now() < watchUntil) {
        if (await inFlight()) {
          midPublish = true;
          break;
        }
        await sleep(5);
      }
      const killedAt = Date.now();
      await victim.kill();
      const pending = await db
        .selectFrom('webhook_deliveries')
        .select(({ fn }) => fn.countAll<string>().as('count'))
        .where('endpoint_id', 'in', endpointIds)
        .where('status', '=', 'pending')
        .executeTakeFirstOrThrow();
      t.diagnostic(
        `${victim.workerId} killed ${midPublish ? 'with' : 'without'} an attempt of its seen open; ${pending.count} broker deliveries pending just after`,
      );

      // The dead node's instances get their second batch through the survivors, once they failed over (a request
      // answered other than 200 is asked again).
      await Promise.all(
        victimInstances.map(async (id, n) => {
          for (let i = 1; i <= SECOND; i++) {
            const through = survivors[(n + i) % survivors.length];
            assert.ok(through);
            await inboundAccepted(() => through, key, id, `second ${i}`, refused);
            if (i === 1) t.diagnostic(`${id} answered again ${Date.now() - killedAt} ms after the kill`);
          }
        }),
      );
      await sending;
      t.diagnostic(`${refused.count} inbound requests answered other than 200 and asked again`);

      // Every Message event of every instance, and its delivery to both endpoints of its instance, delivered.
      const events = () =>
        db
          .selectFrom('webhook_events')
          .select(['id', 'instance_id', 'payload'])
          .where('instance_id', 'in', instanceIds)
          .where('type', '=', 'Message')
          .execute();
      const deliveries = () =>
        db
          .selectFrom('webhook_deliveries')
          .select(['endpoint_id', 'event_id', 'status'])
          .where('endpoint_id', 'in', endpointIds)
          .execute();
      let summary = '';
      const waitStarted = Date.now();
      await until(
        async () => {
          const [all, rows] = [await events(), await deliveries()];
          const delivered = rows.filter((row) => row.status === 'delivered').length;
          summary = `${delivered} of ${rows.length} delivered, ${all.length * 2} expected`;
          return rows.length === all.length * 2 && delivered === rows.length;
        },
        DELIVERY_TIMEOUT_MS,
        'every broker delivery delivered',
      ).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}: ${summary}`);
      });
      t.diagnostic(`all delivered ${Date.now() - waitStarted} ms after the last message was sent`);

      const all = await events();
      const expectedCount = instanceIds.length * (FIRST + SECOND);
      // One event per inbound message; a request asked again may have been recorded before its answer was lost.
      assert.ok(
        all.length >= expectedCount && all.length <= expectedCount + refused.count,
        `${all.length} Message events for ${expectedCount} messages answered 200 and ${refused.count} asked again`,
      );
      const expected = new Set(all.map((event) => event.id));
      const eventOf = new Map(all.map((event) => [event.id, event]));
      const rows = await deliveries();
      for (const endpoint of [...amqpEndpoints, ...natsEndpoints]) {
        assert.deepEqual(
          new Set(rows.filter((row) => row.endpoint_id === endpoint.id).map((row) => row.event_id)),
          new Set(all.filter((event) => event.instance_id === endpoint.instanceId).map((event) => event.id)),
          `endpoint ${endpoint.id} has a delivery of every Message event of ${endpoint.instanceId}`,
        );
      }

      // RabbitMQ: every event at least once (a publish confirmed as its node died is published again).
      const amqpSecret = new Map(amqpEndpoints.map((endpoint) => [endpoint.instanceId, endpoint.secret]));
      const queued = await queue.drain();
      assert.deepEqual(new Set(queued.map((message) => message.messageId)), expected);
      for (const message of queued) {
        const event = eventOf.get(message.messageId ?? '');
        assert.ok(event);
        assert.equal(message.routingKey, `parley.${event.instance_id}.Message`);
        assert.equal(message.type, 'Message');
        assert.equal(message.deliveryMode, 2, 'persistent');
        assert.equal(message.body, event.payload);
        assert.equal(message.headers['webhook-id'], event.id);
        assertSigned(
          message.headers,
          message.body,
          amqpSecret.get(event.instance_id) ?? '',
          `amqp ${event.id}`,
        );
      }
      t.diagnostic(`RabbitMQ: ${queued.length} messages for ${expected.size} events`);

      // NATS: every event exactly once (the duplicate window drops a republished one).
      const natsSecret = new Map(natsEndpoints.map((endpoint) => [endpoint.instanceId, endpoint.secret]));
      const stored = await stream.read();
      const natsIds = stored.map((message) => message.header?.get('Nats-Msg-Id') ?? '');
      assert.equal(natsIds.length, expected.size, 'each event stored once');
      assert.deepEqual(new Set(natsIds), expected);
      for (const message of stored) {
        const id = message.header?.get('Nats-Msg-Id') ?? '';
        const event = eventOf.get(id);
        assert.ok(event);
        const body = new TextDecoder().decode(message.data);
        assert.equal(message.subject, `parley.${event.instance_id}.Message`);
        assert.equal(body, event.payload);
        const headers = Object.fromEntries(
          ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [
            name,
            message.header?.get(name) ?? '',
          ]),
        );
        assert.equal(headers['webhook-id'], id);
        assertSigned(headers, body, natsSecret.get(event.instance_id) ?? '', `nats ${id}`);
      }

      // The outbox is shared: more than one node published these endpoints' events.
      const attempts = await db
        .selectFrom('webhook_attempts')
        .select(['worker', 'error'])
        .where('endpoint_id', 'in', endpointIds)
        .execute();
      const byWorker = new Map<string, number>();
      for (const attempt of attempts) byWorker.set(attempt.worker, (byWorker.get(attempt.worker) ?? 0) + 1);
      const errors = new Map<string, number>();
      for (const { error } of attempts) if (error !== null) errors.set(error, (errors.get(error) ?? 0) + 1);
      t.diagnostic(`attempts by node: ${JSON.stringify(Object.fromEntries(byWorker))}`);
      t.diagnostic(`failed attempts: ${JSON.stringify(Object.fromEntries(errors))}`);
      assert.ok(byWorker.size >= 2, `attempts by at least two nodes: ${[...byWorker.keys()].join(', ')}`);
      for (const worker of byWorker.keys()) {
        assert.ok(
          nodes.some((node) => node.workerId === worker),
          `${worker} is a node of the cluster`,
        );
      }
    });
  });
}
