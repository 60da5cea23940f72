import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, type TestStore } from '../support/store.ts';
import { type Child, childEnv, newSecretKey, PEER, prepare, seed, startChild } from '../webhooks/child.ts';

/**
 * Three parley nodes as child processes sharing one PostgreSQL schema (and Redis when TEST_REDIS_URL is set), with
 * sandbox instances and a webhook receiver, and the traffic and delivery checks the several-node tests share.
 */

/** Sandbox instances of a test cluster. */
export const INSTANCES = 6;

export interface Outcome {
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

export async function call(port: number, method: string, path: string, key: string, body?: unknown) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // A balancer's own error page is not JSON: keep its status (a 503 from HAProxy is not a lost connection).
  const text = await response.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { nonJson: text.slice(0, 200) };
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

export interface Cluster {
  testStore: TestStore;
  receiver: Receiver;
  nodes: Child[];
  key: string;
  instanceIds: string[];
}

export async function startCluster(): Promise<Cluster> {
  const testStore = await createTestStore('postgres');
  const receiver = await startReceiver();
  const env = {
    ...childEnv(testStore, newSecretKey()),
    CLUSTER_SECRET: 'test-cluster-secret-0123456789abcdef',
    CHILD_LEASE_HEARTBEAT_MS: '500',
    CHILD_LEASE_TTL_MS: '3000',
    // Longer than HAProxy's detection in ./haproxy.ts (checks every 500 ms, down after two failures, each check
    // allowed up to 2 s on a loaded machine).
    DRAIN_GRACE_SECONDS: '3',
    ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL } : {}),
  };
  // One after the other: three processes compiling at once can starve a loaded two-core machine.
  const nodes: Child[] = [];
  try {
    for (const id of ['n1', 'n2', 'n3']) nodes.push(await startChild(env, id));
  } catch (error) {
    await Promise.all(nodes.map((node) => node.kill()));
    await receiver.close();
    await testStore.cleanup();
    throw error;
  }
  const { instances, key } = await seed(testStore, INSTANCES, { unlimited: true });
  // Each instance is set up through a different node than the one that ends up owning it, often.
  for (const [i, instance] of instances.entries()) {
    const node = nodes[i % nodes.length];
    assert.ok(node);
    await prepare(node, key, instance.id, receiver.url, `55119100000${i}`);
  }
  return { testStore, receiver, nodes, key, instanceIds: instances.map((instance) => instance.id) };
}

export async function owners(cluster: Cluster): Promise<Map<string, string>> {
  const rows = await cluster.testStore.store.db.selectFrom('instance_leases').selectAll().execute();
  return new Map(rows.map((row) => [row.instance_id, row.owner]));
}

/**
 * Sends and inbound messages on every instance, one request at a time per instance, each through a random node
 * among `usable()`, until `stop()` says so.
 */
export async function stream(
  cluster: Cluster,
  usable: () => { port: number; workerId: string }[],
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
export async function assertDelivered(cluster: Cluster, sentIds: readonly string[]) {
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

export async function stopAll(cluster: Cluster) {
  await Promise.all(cluster.nodes.map((node) => node.terminate()));
  await cluster.receiver.close();
  await cluster.testStore.cleanup();
}
