import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import pg from 'pg';
import { adminCreateInstance, adminCreateKey, adminCreateOrg } from '../../src/admin/admin.ts';
import { migrateToLatest, openStore, type Store } from '../../src/store/database.ts';
import type { BenchChild } from '../lib/ipc.ts';
import { type LoadResult, runLoad } from '../lib/load.ts';
import { type ClusterNodeProcess, hostNamePrefix, startNode } from '../lib/nodes.ts';
import { ratioOf, type ScenarioResult, target } from '../lib/report.ts';
import { fmt, percentiles, round, sleep } from '../lib/stats.ts';
import { PEER_PHONE } from '../roles/parley.ts';
import type { ReceiverStats } from '../roles/receiver.ts';

/**
 * Scenario 7, several nodes: real `parley serve` processes (bench/lib/nodes.ts) sharing one fresh schema of the
 * PostgreSQL server at `databaseUrl` and the Redis at `redisUrl`, with `CLUSTER_SECRET` set and the production
 * lease timing (renewal every 2 s, lifetime 8 s). An enterprise org with limits no run reaches, one `svc_test_`
 * key, `instances` sandbox instances logged in through the public API after all three nodes are up (so the leases
 * spread them evenly), each with an HMAC key and a webhook to the benchmark receiver.
 *
 * Leases never move a running session to rebalance, so the run goes from three nodes down to one with the same
 * instances: measured with 3 nodes; one node SIGKILLed under a send stream (failover); measured with the 2
 * survivors; one of them stopped with SIGTERM (its instances handed over); measured with the last node. Each
 * measurement: sends through every node (autocannon, connection i to node i mod n, every connection cycling
 * over the instances, so most requests are forwarded to the owner), the webhook outbox emptied, then a burst of
 * inbound events made through `POST /v1/sandbox/inbound` on every node and delivered by every node's worker.
 */

/** Settings of the cluster scenario. Durations in seconds unless the name says ms. */
export interface ClusterSettings {
  /** PostgreSQL server; the scenario makes a schema of its own there and drops it afterwards. */
  databaseUrl: string;
  /** Redis the nodes share (rate limits, invalidations). */
  redisUrl: string;
  /** Sandbox instances (a multiple of 6 spreads evenly over 1, 2 and 3 nodes). */
  instances: number;
  /** autocannon connections of the send phase (a multiple of 6: the same number per node at 1, 2, 3 nodes). */
  connections: number;
  durationS: number;
  warmupS: number;
  /** Seconds of each delivery burst: inbound requests as fast as the nodes answer them. */
  inboundS: number;
  /** Connections that make the burst's inbound requests. */
  inboundConnections: number;
  /** Send stream before and after the SIGKILL, ms; the stream's pause between a loop's requests, ms. */
  failover: { beforeMs: number; afterMs: number; pauseMs: number };
  /** Longest wait for the outbox to empty or a burst to arrive, ms. */
  timeoutMs: number;
  /** HMAC key of the webhooks (the receiver checks it). */
  hmacKey: string;
}

/** What one node count measured. */
interface Measurement {
  nodes: number;
  /** Instances per node (lease owners) when the measurement started. */
  placement: Record<string, number>;
  send: LoadResult;
  /** Time the send phase's deliveries took to go out once the load stopped, ms. */
  drainMs: number;
  /**
   * With several nodes, the same sends again with every request sent to its instance's owner (a balancer with
   * instance affinity: nothing forwarded): req/s summed over the nodes, and the worst p99, ms.
   */
  direct?: { requestsPerSecond: number; p99: number; errors: number };
  delivery: {
    sent: number;
    received: number;
    duplicates: number;
    badSignatures: number;
    /** Distinct events received / (first inbound request → last receipt). */
    eventsPerSecond: number;
    /** Rate of the inbound requests themselves. */
    inboundPerSecond: number;
    elapsedMs: number;
    latencyMs: { p50: number; p99: number; max: number };
  };
  /** 1-minute load average at the start and at the end. */
  load: [number, number];
}

/** One request of the failover stream. */
interface Outcome {
  instanceId: string;
  node: string;
  status: number;
  /** Message id of a send answered 200. */
  id?: string;
  startedAt: number;
  answeredAt: number;
}

const CA_FILE = fileURLToPath(new URL('../../test/fixtures/tls/cert.pem', import.meta.url));

/** The 1-minute load average, 2 decimals. */
function load1(): number {
  return round(loadavg()[0] ?? 0, 2);
}

/** `url` with `?options=-c search_path=<schema>` added: the nodes' DATABASE_URL. */
function withSchema(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  return parsed.toString();
}

/** Polls `check` every 100 ms until it is true; false when `timeoutMs` passed first. */
async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

/** `POST base+path` with the key and a JSON body; a non-JSON answer gives an empty body with its status. */
async function api(
  base: string,
  key: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: { data?: { id?: string } } }> {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: { data?: { id?: string } } = {};
  try {
    parsed = JSON.parse(text) as { data?: { id?: string } };
  } catch {
    // A non-JSON answer keeps its status.
  }
  return { status: response.status, body: parsed };
}

/**
 * Runs the cluster scenario and returns its rows `cluster-send`, `cluster-delivery` and `cluster-failover`.
 * @throws when the store, a node or the setup fails (nodes, schema and temp folder are cleaned up first).
 */
export async function clusterScenario(
  settings: ClusterSettings,
  receiver: BenchChild,
  log: (line: string) => void,
): Promise<ScenarioResult[]> {
  const { url: webhookUrl } = await receiver.call<{ url: string }>('url');
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-bench-cluster-'));
  const nodes: ClusterNodeProcess[] = [];
  let store: Store | undefined;
  let hosts = '';
  try {
    store = await openStore({ dialect: 'postgres', url: settings.databaseUrl }, { schema, poolSize: 3 });
    await migrateToLatest(store);
    const db = store.db;
    // The org exists before the first node boots, so no node runs the first-boot bootstrap.
    const org = await adminCreateOrg(db, {
      name: 'bench-cluster',
      plan: 'enterprise',
      perMinute: 1_000_000_000,
      perDay: 2_000_000_000, // below PostgreSQL's integer limit
    });
    const { key } = await adminCreateKey(db, { org: org.id, env: 'test', name: 'bench' });
    const env = {
      DATABASE_URL: withSchema(settings.databaseUrl, schema),
      REDIS_URL: settings.redisUrl,
      SECRET_KEY: randomBytes(32).toString('hex'),
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      CLUSTER_SECRET: randomBytes(24).toString('hex'),
      // The load generator stops using a node before it stops it, as a balancer would after its checks.
      DRAIN_GRACE_SECONDS: '0',
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
      OUTBOUND_CA_FILE: CA_FILE,
    };
    // Own host names where possible, so a killed node is found dead as on separate machines (bench/lib/nodes.ts).
    const unshare = hostNamePrefix();
    hosts = unshare === undefined ? 'one host name' : 'a host name each';
    log(`  nodes: ${hosts}${unshare === undefined ? ' (unshare --uts is not available here)' : ''}`);
    // One after the other: three processes compiling at once starve a two-core machine.
    for (const id of ['n1', 'n2', 'n3']) nodes.push(await startNode(id, env, unshare));
    const published = await waitUntil(async () => {
      const rows = await db.selectFrom('nodes').select('url').where('url', 'is not', null).execute();
      return rows.length >= nodes.length;
    }, 30_000);
    if (!published) throw new Error('the three nodes did not publish their URLs within 30 s');

    // Instances, each set up through a different node (the first request places it on the least-loaded node).
    const instanceIds: string[] = [];
    for (let i = 0; i < settings.instances; i++) {
      const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: `bench-${i}` });
      const node = nodes[i % nodes.length];
      if (!node) throw new Error('no node');
      const from = `?from=${instance.id}`;
      const steps: [string, unknown][] = [
        [`/v1/session/connect${from}`, {}],
        [`/v1/session/hmac/config${from}`, { hmacKey: settings.hmacKey }],
        [`/v1/webhook${from}`, { webhookUrl }],
        [`/v1/sandbox/scan${from}`, { phone: `55119${String(i).padStart(8, '0')}` }],
      ];
      for (const [path, body] of steps) {
        const answer = await api(node.url, key, path, body);
        if (answer.status !== 200)
          throw new Error(`${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
      }
      instanceIds.push(instance.id);
    }

    const owners = async (): Promise<Map<string, string>> => {
      const rows = await db.selectFrom('instance_leases').select(['instance_id', 'owner']).execute();
      return new Map(rows.map((row) => [row.instance_id, row.owner]));
    };
    const perNode = (placed: Map<string, string>): Record<string, number> => {
      const counts: Record<string, number> = {};
      for (const owner of placed.values()) counts[owner] = (counts[owner] ?? 0) + 1;
      return counts;
    };
    const pending = async (): Promise<number> => {
      const row = await db
        .selectFrom('webhook_deliveries')
        .select(sql<number>`count(*)`.as('n'))
        .where('status', '=', 'pending')
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    };
    const failedDeliveries = async (): Promise<number> => {
      const row = await db
        .selectFrom('webhook_deliveries')
        .select(sql<number>`count(*)`.as('n'))
        .where('status', '=', 'failed')
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    };
    /** Waits for an empty outbox; the ms it took. @throws when it is not empty within the timeout. */
    const drained = async (what: string): Promise<number> => {
      const started = Date.now();
      if (!(await waitUntil(async () => (await pending()) === 0, settings.timeoutMs))) {
        throw new Error(
          `${what}: ${await pending()} deliveries still pending after ${settings.timeoutMs} ms`,
        );
      }
      return Date.now() - started;
    };
    const sendBody = { phone: PEER_PHONE, body: 'hello from the cluster benchmark' };
    /** The last event `sequence` of every instance that has events. */
    const lastSequences = async (): Promise<Map<string, number>> => {
      const rows = await db
        .selectFrom('webhook_events')
        .select(['instance_id', sql<number>`max(sequence)`.as('last')])
        .groupBy('instance_id')
        .execute();
      return new Map(rows.map((row) => [row.instance_id, Number(row.last)]));
    };
    /** Ids (`webhook-id`s) of the events recorded after `before` that were queued for delivery. */
    const eventsSince = async (before: Map<string, number>): Promise<string[]> => {
      const events = await db
        .selectFrom('webhook_events')
        .select(['id', 'instance_id', 'sequence'])
        .where('skip_reason', 'is', null)
        .execute();
      return events
        .filter((event) => event.sequence > (before.get(event.instance_id) ?? 0))
        .map((event) => event.id);
    };

    const measure = async (serving: ClusterNodeProcess[]): Promise<Measurement> => {
      const loadAtStart = load1();
      const placement = perNode(await owners());
      await drained(`before the ${serving.length}-node measurement`);
      const urls = serving.map((node) => node.url);
      const send = await runLoad({
        url: urls.map((url) => `${url}/v1/messages/send`),
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: sendBody,
        paths: instanceIds.map((id) => `/v1/messages/send?from=${id}`),
        connections: settings.connections,
        durationS: settings.durationS,
        warmupS: settings.warmupS,
      });
      const drainMs = await drained(`after the ${serving.length}-node send phase`);
      let direct: Measurement['direct'];
      if (serving.length > 1) {
        const placed = await owners();
        const runs = await Promise.all(
          serving.map((node) =>
            runLoad({
              url: `${node.url}/v1/messages/send`,
              method: 'POST',
              headers: { authorization: `Bearer ${key}` },
              body: sendBody,
              paths: instanceIds
                .filter((id) => placed.get(id) === node.id)
                .map((id) => `/v1/messages/send?from=${id}`),
              connections: Math.round(settings.connections / serving.length),
              durationS: settings.durationS,
              warmupS: 0,
            }),
          ),
        );
        direct = {
          requestsPerSecond: runs.reduce((sum, run) => sum + run.requestsPerSecond, 0),
          p99: Math.max(...runs.map((run) => run.latencyMs.p99)),
          errors: runs.reduce((sum, run) => sum + run.errors + run.non2xx, 0),
        };
        await drained(`after the ${serving.length}-node owner-direct sends`);
      }
      const before = await lastSequences();
      await receiver.call('reset');
      const startedAt = Date.now();
      const inbound = await runLoad({
        url: urls.map((url) => `${url}/v1/sandbox/inbound`),
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: { phone: PEER_PHONE, body: 'bench event' },
        paths: instanceIds.map((id) => `/v1/sandbox/inbound?from=${id}`),
        connections: settings.inboundConnections,
        durationS: settings.inboundS,
        warmupS: 0,
      });
      // Requests still running when the load stopped are not counted by autocannon but may have recorded their
      // event: the events expected are the store's, once the outbox is empty.
      await drained(`after the ${serving.length}-node delivery burst`);
      const wanted = await eventsSince(before);
      const sent = wanted.length;
      const missing = await receiver.call<string[]>('missing', { ids: wanted });
      const stats = await receiver.call<ReceiverStats>('stats');
      const elapsedMs = Math.max(1, stats.lastAt - startedAt);
      const measurement: Measurement = {
        nodes: serving.length,
        placement,
        send,
        drainMs,
        ...(direct ? { direct } : {}),
        delivery: {
          sent,
          received: sent - missing.length,
          duplicates: stats.duplicates,
          badSignatures: stats.badSignatures,
          eventsPerSecond: round(((sent - missing.length) / elapsedMs) * 1000, 0),
          inboundPerSecond: inbound.requestsPerSecond,
          elapsedMs,
          latencyMs: { p50: stats.latency.p50, p99: stats.latency.p99, max: stats.latency.max },
        },
        load: [loadAtStart, load1()],
      };
      log(
        `  ${serving.length} node(s): send ${fmt(send.requestsPerSecond, 0)} req/s (p99 ${send.latencyMs.p99} ms, ` +
          `${send.errors + send.non2xx} errors${
            direct ? `; to the owners: ${fmt(direct.requestsPerSecond, 0)} req/s` : ''
          }), delivery ${fmt(measurement.delivery.eventsPerSecond, 0)} events/s ` +
          `(${sent - missing.length}/${sent}), inbound ${fmt(inbound.requestsPerSecond, 0)} req/s; load average ${loadAtStart} → ${measurement.load[1]}`,
      );
      return measurement;
    };

    const [n1, n2, n3] = nodes;
    if (!n1 || !n2 || !n3) throw new Error('three nodes expected');
    // The nodes have just started and the later measurements run on warm processes: warm these up first
    // (unmeasured sends, then inbound events, on every node and instance; their deliveries sent).
    for (const [path, seconds] of [
      ['/v1/messages/send', settings.warmupS * 3],
      ['/v1/sandbox/inbound', settings.warmupS * 2],
    ] as const) {
      await runLoad({
        url: nodes.map((node) => `${node.url}${path}`),
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: sendBody,
        paths: instanceIds.map((id) => `${path}?from=${id}`),
        connections: settings.connections,
        durationS: seconds,
        warmupS: 0,
      });
    }
    const three = await measure([n1, n2, n3]);

    // Failover: a send stream on every instance through the live nodes, then SIGKILL of n3.
    await drained('before the failover');
    const placed = await owners();
    const victimInstances = instanceIds.filter((id) => placed.get(id) === n3.id);
    if (victimInstances.length === 0) throw new Error(`${n3.id} holds no instance: nothing to fail over`);
    const sequences = await lastSequences();
    await receiver.call('reset');
    const failoverLoadAtStart = load1();
    const outcomes: Outcome[] = [];
    let live: ClusterNodeProcess[] = [n1, n2, n3];
    let stopped = false;
    const stream = Promise.all(
      instanceIds.map(async (instanceId, lane) => {
        for (let i = 0; !stopped; i++) {
          const node = live[(lane + i) % live.length];
          if (!node) break;
          const startedAt = Date.now();
          const answer = await api(node.url, key, `/v1/messages/send?from=${instanceId}`, sendBody).catch(
            (): Awaited<ReturnType<typeof api>> => ({ status: 0, body: {} }),
          );
          outcomes.push({
            instanceId,
            node: node.id,
            status: answer.status,
            ...(answer.status === 200 && answer.body.data?.id ? { id: answer.body.data.id } : {}),
            startedAt,
            answeredAt: Date.now(),
          });
          await sleep(settings.failover.pauseMs);
        }
      }),
    );
    await sleep(settings.failover.beforeMs);
    // The client stops using the node the moment it is killed, as a balancer does once its checks fail.
    live = [n1, n2];
    const killedAt = Date.now();
    await n3.kill();
    const goneAt = Date.now();
    const backAt = (id: string) =>
      outcomes.find((o) => o.instanceId === id && o.startedAt >= killedAt && o.status === 200)?.answeredAt;
    const allBack = await waitUntil(
      async () => victimInstances.every((id) => backAt(id) !== undefined),
      30_000,
    );
    await sleep(settings.failover.afterMs);
    stopped = true;
    await stream;
    const failoverMs = victimInstances.map((id) => {
      const at = backAt(id);
      return at === undefined ? Number.POSITIVE_INFINITY : at - killedAt;
    });
    const worstMs = allBack ? Math.max(0, ...failoverMs) : 30_000;
    const okIds = outcomes.flatMap((o) => (o.id ? [o.id] : []));
    let stored = 0;
    for (let i = 0; i < okIds.length; i += 500) {
      const chunk = okIds.slice(i, i + 500);
      const rows = await db.selectFrom('messages').select('id').where('id', 'in', chunk).execute();
      stored += new Set(rows.map((row) => row.id)).size;
    }
    // Every event recorded since the stream began (sends of every node, the dead one's included) is delivered.
    const wanted = await eventsSince(sequences);
    let missing: string[] = wanted;
    await waitUntil(async () => {
      missing = await receiver.call<string[]>('missing', { ids: wanted });
      return missing.length === 0;
    }, settings.timeoutMs);
    const failedAfterGone = outcomes.filter((o) => o.status !== 200 && o.startedAt > goneAt).length;
    const failedInFlight = outcomes.filter((o) => o.status !== 200 && o.startedAt <= goneAt).length;
    const failoverStats = percentiles(failoverMs.filter(Number.isFinite));
    const failoverFigures = {
      hosts,
      victim: n3.id,
      victimInstances: victimInstances.length,
      placementBefore: perNode(placed),
      placementAfter: perNode(await owners()),
      failoverMs: failoverMs.map((ms) => (Number.isFinite(ms) ? ms : null)),
      killMs: goneAt - killedAt,
      requests: outcomes.length,
      answered200: okIds.length,
      stored,
      failedInFlight,
      failedAfterGone,
      events: wanted.length,
      undelivered: missing.length,
      load: [failoverLoadAtStart, load1()],
    };
    log(
      `  failover: ${victimInstances.length} instances of ${n3.id} back after ${fmt(worstMs, 0)} ms (worst); ` +
        `${stored}/${okIds.length} sends stored, ${wanted.length - missing.length}/${wanted.length} events ` +
        `delivered; load average ${failoverLoadAtStart} → ${load1()}`,
    );

    const two = await measure([n1, n2]);
    // n2 stops gracefully: its instances are handed to n1.
    const termStarted = Date.now();
    const exitCode = await n2.terminate();
    const handOverMs = Date.now() - termStarted;
    const allOnOne = await waitUntil(
      async () => [...(await owners()).values()].every((owner) => owner === n1.id),
      30_000,
    );
    if (!allOnOne)
      throw new Error(`${n2.id} stopped (exit ${exitCode}) but ${n1.id} does not own every instance`);
    const one = await measure([n1]);
    const failed = await failedDeliveries();

    const runs = [one, two, three];
    const sendRates = runs.map((m) => m.send.requestsPerSecond);
    const deliveryRates = runs.map((m) => m.delivery.eventsPerSecond);
    const perNodeAdded = (rates: number[]) => round(((rates[2] ?? 0) / Math.max(1, rates[0] ?? 0)) ** 0.5, 3);
    const sendErrors = runs.reduce(
      (sum, m) => sum + m.send.errors + m.send.non2xx + (m.direct?.errors ?? 0),
      0,
    );
    const lost = runs.reduce((sum, m) => sum + m.delivery.sent - m.delivery.received, 0);
    const badSignatures = runs.reduce((sum, m) => sum + m.delivery.badSignatures, 0);
    const loads = runs.map((m) => `${m.load[0]}–${m.load[1]}`).join(' / ');
    const sendRatio = ratioOf(three.send.requestsPerSecond, one.send.requestsPerSecond);
    const deliveryRatio = ratioOf(three.delivery.eventsPerSecond, one.delivery.eventsPerSecond);
    const common = {
      instances: settings.instances,
      placement: runs.map((m) => m.placement),
      handOverMs,
      loadAverage: runs.map((m) => ({ nodes: m.nodes, start: m.load[0], end: m.load[1] })),
    };
    return [
      {
        id: 'cluster-send',
        title: '7. send text, 1→3 nodes (PostgreSQL)',
        unit: 'req/s',
        value: three.send.requestsPerSecond,
        baseline: one.send.requestsPerSecond,
        ratio: sendRatio,
        summary:
          `1/2/3 nodes ${sendRates.map((r) => fmt(r, 0)).join(' / ')} req/s (×${fmt(
            ratioOf(two.send.requestsPerSecond, one.send.requestsPerSecond),
            2,
          )} at 2, ×${fmt(sendRatio, 2)} at 3; ×${fmt(perNodeAdded(sendRates), 2)} per node added); p99 ` +
          `${runs.map((m) => m.send.latencyMs.p99).join(' / ')} ms; each request to its instance's owner (2/3 ` +
          `nodes): ${[two, three].map((m) => fmt(m.direct?.requestsPerSecond ?? 0, 0)).join(' / ')} req/s; ` +
          `${sendErrors} errors; load avg ${loads}`,
        targets: [target('no errors', sendErrors, '<=', 0)],
        details: {
          ...common,
          connections: settings.connections,
          perNodeAdded: perNodeAdded(sendRates),
          runs: runs.map((m) => ({ nodes: m.nodes, load: m.send, drainMs: m.drainMs, direct: m.direct })),
        },
      },
      {
        id: 'cluster-delivery',
        title: '7. webhook delivery, 1→3 nodes (PostgreSQL)',
        unit: 'events/s',
        value: three.delivery.eventsPerSecond,
        baseline: one.delivery.eventsPerSecond,
        ratio: deliveryRatio,
        summary:
          `1/2/3 nodes ${deliveryRates.map((r) => fmt(r, 0)).join(' / ')} events/s (×${fmt(
            ratioOf(two.delivery.eventsPerSecond, one.delivery.eventsPerSecond),
            2,
          )} at 2, ×${fmt(deliveryRatio, 2)} at 3; ×${fmt(perNodeAdded(deliveryRates), 2)} per node added); ` +
          `inbound ${runs.map((m) => fmt(m.delivery.inboundPerSecond, 0)).join(' / ')} req/s; ` +
          `${runs.map((m) => `${m.delivery.received}/${m.delivery.sent}`).join(', ')} received; p99 ` +
          `${runs.map((m) => m.delivery.latencyMs.p99).join(' / ')} ms`,
        targets: [
          target('nothing lost (every event received)', lost, '<=', 0, ' events'),
          target('no failed delivery', failed, '<=', 0, ' deliveries'),
          target('every signature valid', badSignatures, '<=', 0, ' requests'),
        ],
        details: {
          ...common,
          inboundConnections: settings.inboundConnections,
          perNodeAdded: perNodeAdded(deliveryRates),
          runs: runs.map((m) => ({ nodes: m.nodes, ...m.delivery })),
        },
      },
      {
        id: 'cluster-failover',
        title: '7. failover: SIGKILL of 1 of 3 nodes',
        unit: 'ms',
        value: worstMs,
        baseline: null,
        ratio: null,
        summary:
          `${victimInstances.length} instances back through the other nodes after ${fmt(
            failoverStats.p50,
            0,
          )}–${fmt(worstMs, 0)} ms; ${stored}/${okIds.length} sends answered 200 stored; ` +
          `${wanted.length - missing.length}/${wanted.length} events delivered; ${failedInFlight} requests in ` +
          `flight failed, ${failedAfterGone} after; nodes with ${hosts}; load avg ${failoverLoadAtStart}–${failoverFigures.load[1]}`,
        targets: [
          target('every instance back ≤ 15 s', worstMs, '<=', 15_000, ' ms'),
          target('every send answered 200 stored', okIds.length - stored, '<=', 0, ' messages'),
          target('every event delivered', missing.length, '<=', 0, ' events'),
          target('no request failed once the node was gone', failedAfterGone, '<=', 0, ' requests'),
        ],
        details: failoverFigures,
      },
    ];
  } finally {
    await Promise.all(nodes.map((node) => node.terminate(10_000)));
    await store?.destroy();
    const client = new pg.Client({ connectionString: settings.databaseUrl });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await client.end();
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}
