import assert from 'node:assert/strict';
import { afterEach } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Simulator } from '../../sim/simulator.ts';
import { LEASE_HEARTBEAT_MS, LEASE_TTL_MS } from '../../src/nodes/leases.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, type TestStore } from '../support/store.ts';
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
 * Three parley nodes as child processes sharing one PostgreSQL schema (and Redis when TEST_REDIS_URL is set), with
 * sandbox instances and a webhook receiver, and the traffic and delivery checks the several-node tests share (the
 * same with live instances against the platform simulator: live-cluster.ts).
 */

/** Sandbox instances of a test cluster. */
export const INSTANCES = 6;

/** The failover bound: a dead node's instances answer again through any node within this, ms. */
export const FAILOVER_BOUND_MS = 15_000;

/**
 * The safety net of a wait for a condition in the several-node tests, ms: not a speed check. A wait ends as soon as
 * its condition holds; this bound only turns a condition that never comes into a failure naming what was awaited.
 * Starting nodes, linking accounts and moving instances have no bound of their own worth checking here, only work that
 * a loaded 2-core machine makes slow (as the live tests' safety net, test/live/support.ts `WAIT_MS`). A bound the
 * tests check (the failover within {@link FAILOVER_BOUND_MS}) is asserted apart from the wait.
 */
export const WAIT_MS = 120_000;

export interface Outcome {
  instanceId: string;
  kind: 'send' | 'inbound';
  /** The node's worker id the request went to; `simulator` for a message a simulated user sent (live streams). */
  node: string;
  status: number;
  /** Message id of a 200 send, or of a message a simulated user sent (live streams). */
  id?: string;
  /** The error message of an answer other than 200, when it had one (what a failed assertion then shows). */
  error?: string;
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

/**
 * Lease timing of a cluster whose test allows no failed request: the production heartbeat and lifetime
 * (src/nodes/leases.ts). With the fast test leases a node fences itself (closes every session) when a renewal is
 * 2.5 s late, which a loaded two-core machine can cause; a request in flight then fails, as it should when the lease
 * may really have expired. A graceful stop hands instances over explicitly, so it needs no fast expiry.
 */
export const GRACEFUL_LEASES: Record<string, string> = {
  CHILD_LEASE_HEARTBEAT_MS: String(LEASE_HEARTBEAT_MS),
  CHILD_LEASE_TTL_MS: String(LEASE_TTL_MS),
};

/**
 * The requests of `outcomes` that did not answer 200, with the last warnings of each node (its log at `warn`), as an
 * assertion's message: what a failure in CI needs to be understood.
 */
export function failedRequests(cluster: Cluster, outcomes: readonly Outcome[]): string {
  const failed = outcomes.filter((o) => o.status !== 200);
  const logs = cluster.nodes.map((node) => `--- ${node.workerId}:\n${node.stderr()}`).join('\n');
  return `failed requests: ${JSON.stringify(failed, null, 1)}\nnode logs:\n${logs}`;
}

/**
 * Environment of every node of a test cluster: fast leases, a short drain grace, the test's Redis, warnings logged
 * (kept by {@link Child.stderr} for a failure's message).
 */
export function clusterEnv(testStore: TestStore, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...childEnv(testStore, newSecretKey()),
    CLUSTER_SECRET: 'test-cluster-secret-0123456789abcdef',
    CHILD_LEASE_HEARTBEAT_MS: '500',
    CHILD_LEASE_TTL_MS: '3000',
    // Longer than HAProxy's detection in ./haproxy.ts (checks every 500 ms, down after two failures, each check
    // allowed up to 2 s on a loaded machine).
    DRAIN_GRACE_SECONDS: '3',
    CHILD_LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL } : {}),
    ...extra,
  };
}

/**
 * Starts nodes n1, n2, n3 with `env`, one after the other (three processes compiling at once can starve a loaded
 * two-core machine). On a failure the nodes started are killed and `cleanup` runs before the error is rethrown.
 */
export async function startNodes(
  env: Record<string, string>,
  cleanup: () => Promise<void>,
): Promise<Child[]> {
  const nodes: Child[] = [];
  try {
    for (const id of ['n1', 'n2', 'n3']) nodes.push(await startChild(env, id));
  } catch (error) {
    await Promise.all(nodes.map((node) => node.kill()));
    await cleanup();
    throw error;
  }
  return nodes;
}

/**
 * Three sandbox nodes on a fresh PostgreSQL schema with {@link INSTANCES} instances connected and logged in, spread
 * across them. `env` adds to or overrides {@link clusterEnv} (a test of a graceful stop uses the production lease
 * timing, {@link GRACEFUL_LEASES}).
 */
export async function startCluster(env: Record<string, string> = {}): Promise<Cluster> {
  const testStore = await createTestStore('postgres');
  const receiver = await startReceiver();
  const nodes = await startNodes(clusterEnv(testStore, env), async () => {
    await receiver.close();
    await testStore.cleanup();
  });
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

/** A node a stream may use: its port and worker id. */
export interface Usable {
  port: number;
  workerId: string;
}

/**
 * One request of a stream: a send (`kind` `send`) or an inbound message (`inbound`) with text `text` on
 * `instanceId`, through `node` where it goes through parley. Resolves with the answer's status (0: no answer), the
 * message id when there is one, and where the request went (a worker id, or `simulator`); never rejects.
 */
export type StreamRequest = (
  kind: Outcome['kind'],
  instanceId: string,
  text: string,
  node: Usable,
) => Promise<{ status: number; id?: string; node: string; error?: string }>;

/** A sandbox stream's request: `POST /v1/messages/send` or `POST /v1/sandbox/inbound` to {@link PEER}. */
function sandboxRequest(cluster: Cluster): StreamRequest {
  return async (kind, instanceId, text, node) => {
    const path = kind === 'send' ? '/v1/messages/send' : '/v1/sandbox/inbound';
    const result = await call(node.port, 'POST', `${path}?from=${instanceId}`, cluster.key, {
      phone: PEER,
      body: text,
    }).catch(() => ({ status: 0, body: undefined }));
    const error = result.body?.error?.message;
    return {
      status: result.status,
      node: node.workerId,
      ...(kind === 'send' && result.status === 200 ? { id: String(result.body.data.id) } : {}),
      ...(typeof error === 'string' ? { error } : {}),
    };
  };
}

/**
 * Sends and inbound messages on every instance, one request at a time per instance, each through a random node
 * among `usable()`, until `stop()` says so. `request` makes each request (default: the sandbox's).
 */
export async function stream(
  cluster: Cluster,
  usable: () => Usable[],
  stop: () => boolean,
  outcomes: Outcome[],
  request: StreamRequest = sandboxRequest(cluster),
): Promise<void> {
  await Promise.all(
    cluster.instanceIds.map(async (instanceId, n) => {
      for (let i = 0; !stop(); i++) {
        const nodes = usable();
        const node = nodes[(n + i) % nodes.length];
        if (!node) break;
        const kind = i % 2 === 0 ? 'send' : 'inbound';
        const startedAt = Date.now();
        const result = await request(kind, instanceId, `${kind} ${n}.${i}`, node);
        outcomes.push({
          instanceId,
          kind,
          node: result.node,
          status: result.status,
          ...(result.id === undefined ? {} : { id: result.id }),
          ...(result.error === undefined ? {} : { error: result.error }),
          startedAt,
          answeredAt: Date.now(),
        });
        await sleep(40);
      }
    }),
  );
}

/** A running {@link stream}: its outcomes so far, nodes taken out of it, and its end. */
export interface Traffic {
  /** Every request answered so far, in answer order. */
  outcomes: Outcome[];
  /** Sends nothing more to `node`, as a balancer takes out a node whose check failed (before it is stopped). */
  without(node: Usable): void;
  /**
   * Waits until `count` more requests were answered (at most the safety net {@link WAIT_MS}, ms).
   * @throws naming `what` when they were not.
   */
  more(count: number, what: string): Promise<void>;
  /** Ends the stream once the requests in flight are answered. */
  stop(): Promise<void>;
}

/**
 * Starts a {@link stream} through `through` (default: the cluster's nodes still in it) and waits until `atLeast`
 * requests were answered 200 (at most the safety net {@link WAIT_MS}). `request` makes each request (default: the sandbox's).
 * @throws when the traffic does not reach `atLeast` in time.
 */
export async function startTraffic(
  cluster: Cluster,
  options: { atLeast: number; through?: Usable[]; request?: StreamRequest },
): Promise<Traffic> {
  const outcomes: Outcome[] = [];
  const out = new Set<Usable>();
  let stopped = false;
  const usable = () => (options.through ?? cluster.nodes).filter((node) => !out.has(node));
  const running = stream(cluster, usable, () => stopped, outcomes, options.request);
  await until(
    async () => outcomes.filter((o) => o.status === 200).length >= options.atLeast,
    WAIT_MS,
    'traffic',
  );
  return {
    outcomes,
    without: (node) => out.add(node),
    async more(count, what) {
      const from = outcomes.length;
      await until(async () => outcomes.length >= from + count, WAIT_MS, what);
    },
    async stop() {
      stopped = true;
      await running;
    },
  };
}

/**
 * Waits until every instance of `instanceIds` answered a request of a kind in `kinds` started after `killedAt`
 * (epoch ms) with 200, and asserts the first such answer came within {@link FAILOVER_BOUND_MS} of it
 * (docs/decisions/0008-leases-and-fencing.md: a dead node's instances answer again through any node). Returns each
 * instance's time to that answer, ms.
 */
export async function assertFailover(
  outcomes: readonly Outcome[],
  instanceIds: readonly string[],
  killedAt: number,
  kinds: readonly Outcome['kind'][] = ['send', 'inbound'],
): Promise<Map<string, number>> {
  const first = (id: string) =>
    outcomes.find(
      (o) => o.instanceId === id && kinds.includes(o.kind) && o.startedAt > killedAt && o.status === 200,
    );
  await until(
    async () => instanceIds.every((id) => first(id) !== undefined),
    WAIT_MS,
    'the dead node instances answer again',
  );
  const times = new Map<string, number>();
  for (const id of instanceIds) {
    const answered = first(id);
    assert.ok(
      answered && answered.answeredAt - killedAt < FAILOVER_BOUND_MS,
      `failover of ${id} within 15 s: took ${answered ? answered.answeredAt - killedAt : '?'} ms`,
    );
    times.set(id, answered.answeredAt - killedAt);
  }
  return times;
}

/** Every event of the cluster's instances was delivered; each webhook-id always carried the same event. */
export async function assertDelivered(cluster: Cluster, sentIds: readonly string[]) {
  const db = cluster.testStore.store.db;
  const events = await db
    .selectFrom('webhook_events')
    .select(['id', 'instance_id', 'sequence'])
    .where('instance_id', 'in', cluster.instanceIds)
    // Events without a delivery (the sessions' SessionStatus events, not subscribed) are never sent.
    .where('skip_reason', 'is', null)
    .execute();
  const wanted = new Set(events.map((event) => event.id));
  await cluster.receiver.waitFor((requests) => {
    const got = new Set(
      requests
        .filter((r) => r.reply.state === 'completed' && r.reply.status === 200)
        .map((r) => String(r.headers['webhook-id'])),
    );
    return [...wanted].every((id) => got.has(id));
  }, WAIT_MS);
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

/**
 * The clusters of a describe block, stopped after each test (one test's nodes stop before the next test starts three
 * more: two cores in CI); tests push the cluster they start onto the returned list. Call inside `describe`.
 */
export function stoppedAfterEach<C extends Cluster & { sim?: Simulator }>(): C[] {
  const clusters: C[] = [];
  afterEach(async () => {
    for (const cluster of clusters.splice(0)) await stopAll(cluster);
  });
  return clusters;
}

/** Instances per node, ascending, from instance id → owner node id (as {@link owners} answers). */
export function perNodeCounts(placed: Map<string, string>): number[] {
  const counts = new Map<string, number>();
  for (const owner of placed.values()) counts.set(owner, (counts.get(owner) ?? 0) + 1);
  return [...counts.values()].sort((a, b) => a - b);
}

/** Stops the nodes (SIGTERM), the receiver, the store and, for a live cluster, the simulator. */
export async function stopAll(cluster: Cluster & { sim?: Simulator }) {
  await Promise.all(cluster.nodes.map((node) => node.terminate()));
  await cluster.receiver.close();
  await cluster.testStore.cleanup();
  await cluster.sim?.close();
}
