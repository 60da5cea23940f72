import { type ClusterProbe, perNode, pollUntil } from './cluster-probe.ts';
import { api } from './cluster-setup.ts';
import type { BenchChild } from './ipc.ts';
import type { ClusterNodeProcess } from './nodes.ts';
import { fmt, load1, percentiles, sleep } from './stats.ts';

/**
 * The failover measurement of the cluster benchmark (bench/scenarios/cluster.ts): a send stream on every instance
 * through the live nodes, one node SIGKILLed under it, and how long its instances took to answer again through
 * the other nodes; then whether every send answered 200 was stored and every event recorded since was delivered.
 */

/** Settings of {@link measureFailover}. */
export interface FailoverSettings {
  /** Send stream before and after the SIGKILL, ms; the stream's pause between a loop's requests, ms. */
  failover: { beforeMs: number; afterMs: number; pauseMs: number };
  /** Longest wait for every event to be delivered, ms. */
  timeoutMs: number;
}

/** What the failover measured (the `details` of the `cluster-failover` row, in this key order). */
export type FailoverFigures = {
  /** How the nodes are named: 'one host name' or 'a host name each'. */
  hosts: string;
  /** Node id of the node killed. */
  victim: string;
  /** Instances the victim owned. */
  victimInstances: number;
  /** Instances per node (node id → count) before the kill and at the end. */
  placementBefore: Record<string, number>;
  placementAfter: Record<string, number>;
  /** Per victim instance, ms from the kill to its first 200 answer of a request started after it; null: never. */
  failoverMs: (number | null)[];
  /** Time the SIGKILL took until the process was gone, ms. */
  killMs: number;
  /** Requests of the stream. */
  requests: number;
  /** Sends answered 200 with a message id, and how many of those messages are stored. */
  answered200: number;
  stored: number;
  /** Requests that failed, started before / after the victim was gone. */
  failedInFlight: number;
  failedAfterGone: number;
  /** Events recorded since the stream began, and how many of them the receiver did not get in the timeout. */
  events: number;
  undelivered: number;
  /** 1-minute load average at the start and at the end. */
  load: [number, number];
};

/** The result of {@link measureFailover}. */
export interface FailoverResult {
  /** The slowest victim instance's failover, ms (30,000 when one was not back within 30 s). */
  worstMs: number;
  /** Median failover of the instances that came back, ms. */
  p50Ms: number;
  figures: FailoverFigures;
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

/**
 * Runs the failover: with an empty outbox, every instance of `instanceIds` sends `sendBody` in a loop through
 * `survivors` and `victim` in turn (the API `key`), for `beforeMs`; then the client stops using `victim` and it is
 * SIGKILLed; the stream goes on until every victim instance answered 200 again (at most 30 s) and `afterMs` more.
 * The receiver is reset first; `log` gets a summary line.
 * @throws Error when `victim` owns no instance, or the outbox is not empty within the probe's timeout.
 */
export async function measureFailover(
  probe: ClusterProbe,
  receiver: BenchChild,
  nodes: { survivors: ClusterNodeProcess[]; victim: ClusterNodeProcess },
  sends: { key: string; instanceIds: string[]; sendBody: unknown; hosts: string },
  settings: FailoverSettings,
  log: (line: string) => void,
): Promise<FailoverResult> {
  const { survivors, victim } = nodes;
  const { key, instanceIds, sendBody, hosts } = sends;
  await probe.drained('before the failover');
  const placed = await probe.owners();
  const victimInstances = instanceIds.filter((id) => placed.get(id) === victim.id);
  if (victimInstances.length === 0) throw new Error(`${victim.id} holds no instance: nothing to fail over`);
  const sequences = await probe.lastSequences();
  await receiver.call('reset');
  const loadAtStart = load1();
  const outcomes: Outcome[] = [];
  let live: ClusterNodeProcess[] = [...survivors, victim];
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
  live = [...survivors];
  const killedAt = Date.now();
  await victim.kill();
  const goneAt = Date.now();
  const backAt = (id: string) =>
    outcomes.find((o) => o.instanceId === id && o.startedAt >= killedAt && o.status === 200)?.answeredAt;
  const allBack = await pollUntil(
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
  const stored = await probe.storedMessages(okIds);
  // Every event recorded since the stream began (sends of every node, the dead one's included) is delivered.
  const wanted = await probe.eventsSince(sequences);
  let missing: string[] = wanted;
  await pollUntil(async () => {
    missing = await receiver.call<string[]>('missing', { ids: wanted });
    return missing.length === 0;
  }, settings.timeoutMs);
  const failedAfterGone = outcomes.filter((o) => o.status !== 200 && o.startedAt > goneAt).length;
  const failedInFlight = outcomes.filter((o) => o.status !== 200 && o.startedAt <= goneAt).length;
  const figures: FailoverFigures = {
    hosts,
    victim: victim.id,
    victimInstances: victimInstances.length,
    placementBefore: perNode(placed),
    placementAfter: perNode(await probe.owners()),
    failoverMs: failoverMs.map((ms) => (Number.isFinite(ms) ? ms : null)),
    killMs: goneAt - killedAt,
    requests: outcomes.length,
    answered200: okIds.length,
    stored,
    failedInFlight,
    failedAfterGone,
    events: wanted.length,
    undelivered: missing.length,
    load: [loadAtStart, load1()],
  };
  log(
    `  failover: ${victimInstances.length} instances of ${victim.id} back after ${fmt(worstMs, 0)} ms (worst); ` +
      `${stored}/${okIds.length} sends stored, ${wanted.length - missing.length}/${wanted.length} events ` +
      `delivered; load average ${loadAtStart} → ${load1()}`,
  );
  return { worstMs, p50Ms: percentiles(failoverMs.filter(Number.isFinite)).p50, figures };
}
