import { measureFailover } from '../lib/cluster-failover.ts';
import { ClusterProbe, perNode, pollUntil } from '../lib/cluster-probe.ts';
import { type Cluster, startCluster } from '../lib/cluster-setup.ts';
import type { BenchChild } from '../lib/ipc.ts';
import { type LoadResult, runLoad } from '../lib/load.ts';
import type { ClusterNodeProcess } from '../lib/nodes.ts';
import { ratioOf, type ScenarioResult, target } from '../lib/report.ts';
import { fmt, load1, round } from '../lib/stats.ts';
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

const sendBody = { phone: PEER_PHONE, body: 'hello from the cluster benchmark' };

/** What a measurement works with: the running cluster, its probes, the receiver, the settings and the log. */
interface Context {
  cluster: Cluster;
  probe: ClusterProbe;
  receiver: BenchChild;
  settings: ClusterSettings;
  log: (line: string) => void;
}

/**
 * Measures the cluster with the nodes `serving`: sends through all of them (then, with several, each to its
 * instance's owner), the outbox emptied after each, then a delivery burst of inbound events.
 * @throws Error when the outbox is not empty within the timeout.
 */
async function measure(context: Context, serving: ClusterNodeProcess[]): Promise<Measurement> {
  const { cluster, probe, receiver, settings, log } = context;
  const { key, instanceIds } = cluster;
  const loadAtStart = load1();
  const placement = perNode(await probe.owners());
  await probe.drained(`before the ${serving.length}-node measurement`);
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
  const drainMs = await probe.drained(`after the ${serving.length}-node send phase`);
  let direct: Measurement['direct'];
  if (serving.length > 1) {
    const placed = await probe.owners();
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
    await probe.drained(`after the ${serving.length}-node owner-direct sends`);
  }
  const before = await probe.lastSequences();
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
  await probe.drained(`after the ${serving.length}-node delivery burst`);
  const wanted = await probe.eventsSince(before);
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
  const cluster = await startCluster({ ...settings, webhookUrl }, log);
  try {
    const { key, instanceIds, hosts } = cluster;
    const probe = new ClusterProbe(cluster.db, settings.timeoutMs);
    const context: Context = { cluster, probe, receiver, settings, log };
    const [n1, n2, n3] = cluster.nodes;
    // The nodes have just started and the later measurements run on warm processes: warm these up first
    // (unmeasured sends, then inbound events, on every node and instance; their deliveries sent).
    for (const [path, seconds] of [
      ['/v1/messages/send', settings.warmupS * 3],
      ['/v1/sandbox/inbound', settings.warmupS * 2],
    ] as const) {
      await runLoad({
        url: cluster.nodes.map((node) => `${node.url}${path}`),
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: sendBody,
        paths: instanceIds.map((id) => `${path}?from=${id}`),
        connections: settings.connections,
        durationS: seconds,
        warmupS: 0,
      });
    }
    const three = await measure(context, [n1, n2, n3]);

    // Failover: a send stream on every instance through the live nodes, then SIGKILL of n3.
    const failover = await measureFailover(
      probe,
      receiver,
      { survivors: [n1, n2], victim: n3 },
      { key, instanceIds, sendBody, hosts },
      settings,
      log,
    );
    const { worstMs, figures: f } = failover;

    const two = await measure(context, [n1, n2]);
    // n2 stops gracefully: its instances are handed to n1.
    const termStarted = Date.now();
    const exitCode = await n2.terminate();
    const handOverMs = Date.now() - termStarted;
    const allOnOne = await pollUntil(
      async () => [...(await probe.owners()).values()].every((owner) => owner === n1.id),
      30_000,
    );
    if (!allOnOne)
      throw new Error(`${n2.id} stopped (exit ${exitCode}) but ${n1.id} does not own every instance`);
    const one = await measure(context, [n1]);
    const failed = await probe.failedDeliveries();

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
          `${f.victimInstances} instances back through the other nodes after ${fmt(failover.p50Ms, 0)}–${fmt(
            worstMs,
            0,
          )} ms; ${f.stored}/${f.answered200} sends answered 200 stored; ` +
          `${f.events - f.undelivered}/${f.events} events delivered; ${f.failedInFlight} requests in ` +
          `flight failed, ${f.failedAfterGone} after; nodes with ${f.hosts}; load avg ${f.load[0]}–${f.load[1]}`,
        targets: [
          target('every instance back ≤ 15 s', worstMs, '<=', 15_000, ' ms'),
          target('every send answered 200 stored', f.answered200 - f.stored, '<=', 0, ' messages'),
          target('every event delivered', f.undelivered, '<=', 0, ' events'),
          target('no request failed once the node was gone', f.failedAfterGone, '<=', 0, ' requests'),
        ],
        details: f,
      },
    ];
  } finally {
    await cluster.cleanup();
  }
}
