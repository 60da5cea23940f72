import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import {
  type Child,
  childEnv,
  newSecretKey,
  PEER,
  prepare,
  seed,
  startChild,
  until,
} from '../webhooks/child.ts';

/**
 * Several nodes (DESIGN D17), end to end: three real parley processes sharing one PostgreSQL schema (and Redis when
 * TEST_REDIS_URL is set), sandbox instances spread across them, a steady stream of sends and inbound messages
 * through every node, then one node is killed (SIGKILL) or stopped (SIGTERM). The client stops using a node the
 * moment it is killed or stopped, as a load balancer does once its health check fails.
 */

/** The failover bound: a dead node's instances answer again through any node within this, ms. */
const FAILOVER_BOUND_MS = 15_000;
const INSTANCES = 6;

interface Outcome {
  instanceId: string;
  kind: 'send' | 'inbound';
  /** The node's worker id the request went to. */
  node: string;
  status: number;
  /** Message id of a 200 send. */
  id?: string;
  /** Epoch ms when the request started and when it was answered. */
  startedAt: number;
  answeredAt: number;
}

async function call(port: number, method: string, path: string, key: string, body?: unknown) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as any, headers: response.headers };
}

interface Cluster {
  testStore: TestStore;
  receiver: Receiver;
  nodes: Child[];
  key: string;
  instanceIds: string[];
}

async function startCluster(): Promise<Cluster> {
  const testStore = await createTestStore('postgres');
  const receiver = await startReceiver();
  const env = {
    ...childEnv(testStore, newSecretKey()),
    CLUSTER_SECRET: 'test-cluster-secret-0123456789abcdef',
    CHILD_LEASE_HEARTBEAT_MS: '500',
    CHILD_LEASE_TTL_MS: '3000',
    ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL } : {}),
  };
  const nodes = await Promise.all(['n1', 'n2', 'n3'].map((id) => startChild(env, id)));
  const { instances, key } = await seed(testStore, INSTANCES);
  // Each instance is set up through a different node than the one that ends up owning it, often.
  for (const [i, instance] of instances.entries()) {
    const node = nodes[i % nodes.length];
    assert.ok(node);
    await prepare(node, key, instance.id, receiver.url, `55119100000${i}`);
  }
  return { testStore, receiver, nodes, key, instanceIds: instances.map((instance) => instance.id) };
}

async function owners(cluster: Cluster): Promise<Map<string, string>> {
  const rows = await cluster.testStore.store.db.selectFrom('instance_leases').selectAll().execute();
  return new Map(rows.map((row) => [row.instance_id, row.owner]));
}

/**
 * Sends and inbound messages on every instance, one request at a time per instance, each through a random node
 * among `usable()`, until `stop()` says so.
 */
async function stream(
  cluster: Cluster,
  usable: () => Child[],
  stop: () => boolean,
  outcomes: Outcome[],
): Promise<void> {
  await Promise.all(
    cluster.instanceIds.map(async (instanceId, n) => {
      for (let i = 0; !stop(); i++) {
        const nodes = usable();
        const node = nodes[(n + i) % nodes.length];
        if (!node) break;
        const kind = i % 2 === 0 ? 'send' : 'inbound';
        const startedAt = Date.now();
        const path = kind === 'send' ? '/v1/messages/send' : '/v1/sandbox/inbound';
        const result = await call(node.port, 'POST', `${path}?from=${instanceId}`, cluster.key, {
          phone: PEER,
          body: `${kind} ${n}.${i}`,
        }).catch(() => ({ status: 0, body: undefined }));
        outcomes.push({
          instanceId,
          kind,
          node: node.workerId,
          status: result.status,
          ...(kind === 'send' && result.status === 200 ? { id: String(result.body.data.id) } : {}),
          startedAt,
          answeredAt: Date.now(),
        });
        await sleep(40);
      }
    }),
  );
}

/** Every event of the cluster's instances was delivered; each webhook-id always carried the same event. */
async function assertDelivered(cluster: Cluster, sentIds: readonly string[]) {
  const db = cluster.testStore.store.db;
  const events = await db
    .selectFrom('webhook_events')
    .select(['id', 'instance_id', 'sequence'])
    .where('instance_id', 'in', cluster.instanceIds)
    .execute();
  const wanted = new Set(events.map((event) => event.id));
  await cluster.receiver.waitFor((requests) => {
    const got = new Set(
      requests
        .filter((r) => r.reply.state === 'completed' && r.reply.status === 200)
        .map((r) => String(r.headers['webhook-id'])),
    );
    return [...wanted].every((id) => got.has(id));
  }, 30_000);
  // A duplicate delivery carries the same webhook-id and body; one event never goes out under two ids.
  const bodyOf = new Map<string, string>();
  const idOf = new Map<string, string>();
  const bodies: string[] = [];
  for (const request of cluster.receiver.requests) {
    const body = request.body.toString();
    bodies.push(body);
    const parsed = JSON.parse(body) as { sequence: number; instanceId: string };
    const webhookId = String(request.headers['webhook-id']);
    const event = `${parsed.instanceId}/${parsed.sequence}`;
    assert.equal(bodyOf.get(webhookId) ?? body, body, 'a duplicate carries the same event');
    assert.equal(idOf.get(event) ?? webhookId, webhookId, `event ${event} under one webhook-id`);
    bodyOf.set(webhookId, body);
    idOf.set(event, webhookId);
  }
  // Distinct webhook ids are distinct events: no event was recorded twice.
  const keys = events.map((event) => `${event.instance_id}/${event.sequence}`);
  assert.equal(new Set(keys).size, keys.length);
  // Every send answered 200 is stored and its webhook was delivered.
  const stored = await db
    .selectFrom('messages')
    .select('id')
    .where('id', 'in', [...sentIds])
    .execute();
  assert.equal(stored.length, new Set(sentIds).size, 'every 200 send is stored');
  const all = bodies.join('\n');
  for (const id of sentIds) assert.ok(all.includes(id), `webhook of sent message ${id} delivered`);
}

async function stopAll(cluster: Cluster) {
  await Promise.all(cluster.nodes.map((node) => node.terminate()));
  await cluster.receiver.close();
  await cluster.testStore.cleanup();
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`three nodes on ${dialect}`, () => {
    const clusters: Cluster[] = [];
    after(async () => {
      for (const cluster of clusters) await stopAll(cluster);
    });

    it('spreads instances, answers for every instance on every node, and survives SIGKILL of a node', async () => {
      const cluster = await startCluster();
      clusters.push(cluster);
      const placed = await owners(cluster);
      const perNode = new Map<string, number>();
      for (const owner of placed.values()) perNode.set(owner, (perNode.get(owner) ?? 0) + 1);
      assert.deepEqual([...perNode.values()].sort(), [2, 2, 2], 'two instances per node');

      const outcomes: Outcome[] = [];
      const dead = new Set<Child>();
      let stopped = false;
      const running = stream(
        cluster,
        () => cluster.nodes.filter((node) => !dead.has(node)),
        () => stopped,
        outcomes,
      );
      await until(async () => outcomes.filter((o) => o.status === 200).length >= 24, 20_000, 'traffic');
      const victim = cluster.nodes[0];
      assert.ok(victim);
      const victimInstances = [...placed].filter(([, owner]) => owner === victim.workerId).map(([id]) => id);
      assert.equal(victimInstances.length, 2);
      dead.add(victim);
      const killedAt = Date.now();
      await victim.kill();
      // Every instance of the dead node answers 200 again, through the surviving nodes.
      await until(
        async () =>
          victimInstances.every((id) =>
            outcomes.some((o) => o.instanceId === id && o.startedAt > killedAt && o.status === 200),
          ),
        FAILOVER_BOUND_MS + 5000,
        'the dead node instances answer again',
      );
      for (const id of victimInstances) {
        const first = outcomes.find((o) => o.instanceId === id && o.startedAt > killedAt && o.status === 200);
        assert.ok(first && first.answeredAt - killedAt < FAILOVER_BOUND_MS, `failover of ${id} within 15 s`);
      }
      // Some more traffic on the new owners, then stop.
      const count = outcomes.length;
      await until(async () => outcomes.length >= count + 12, 10_000, 'traffic after failover');
      stopped = true;
      await running;
      // Only requests in flight on the dead node (received by it, or forwarded to it) may have failed.
      const failedElsewhere = outcomes.filter(
        (o) => o.status !== 200 && o.node !== victim.workerId && !victimInstances.includes(o.instanceId),
      );
      assert.deepEqual(failedElsewhere, []);
      // A request started after the kill waits for the failover instead of failing.
      assert.deepEqual(
        outcomes.filter((o) => o.status !== 200 && o.startedAt > killedAt),
        [],
      );
      const after = await owners(cluster);
      for (const id of victimInstances) assert.notEqual(after.get(id), victim.workerId);
      await assertDelivered(
        cluster,
        outcomes.flatMap((o) => (o.id ? [o.id] : [])),
      );
    });

    it('on SIGTERM hands its instances over with no failed request at all', async () => {
      const cluster = await startCluster();
      clusters.push(cluster);
      const outcomes: Outcome[] = [];
      const gone = new Set<Child>();
      let stopped = false;
      const running = stream(
        cluster,
        () => cluster.nodes.filter((node) => !gone.has(node)),
        () => stopped,
        outcomes,
      );
      await until(async () => outcomes.filter((o) => o.status === 200).length >= 24, 20_000, 'traffic');
      const leaving = cluster.nodes[1];
      assert.ok(leaving);
      gone.add(leaving);
      const code = await leaving.terminate();
      assert.equal(code, 0);
      const count = outcomes.length;
      await until(async () => outcomes.length >= count + 24, 15_000, 'traffic after the hand-over');
      stopped = true;
      await running;
      assert.deepEqual(
        outcomes.filter((o) => o.status !== 200),
        [],
        'no failed request',
      );
      const after = await owners(cluster);
      assert.ok(![...after.values()].includes(leaving.workerId), 'no lease left on the stopped node');
      await assertDelivered(
        cluster,
        outcomes.flatMap((o) => (o.id ? [o.id] : [])),
      );
    });
  });
}
