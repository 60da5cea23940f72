import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { control, simCaFile, startTestSimulator } from '../live/support.ts';
import { startReceiver, webhookIdsByMessage } from '../support/https-receiver.ts';
import { createTestStore } from '../support/store.ts';
import { type Child, seed, until } from '../webhooks/child.ts';
import { HMAC_KEY } from '../webhooks/support.ts';
import {
  assertDelivered,
  type Cluster,
  call,
  clusterEnv,
  type Outcome,
  type StreamRequest,
  startNodes,
  stopAll,
  WAIT_MS,
} from './support.ts';

/**
 * Three parley nodes (support.ts) with live instances, the real Baileys engine, each linked by a QR scan to its own
 * account on the platform simulator; the live stream's requests and the checks that what it sent and received was
 * kept.
 */

/** Live instances of a live test cluster: one per node. */
export const LIVE_INSTANCES = 3;

/** The simulated user who writes to the live instances and receives their sends. */
export const LIVE_PEER = '5511988880003';

/** A test cluster whose instances are live: linked accounts on the platform simulator. */
export interface LiveCluster extends Cluster {
  sim: Simulator;
  /** The simulator account (phone, digits) each instance is linked to, by instance id. */
  phones: Map<string, string>;
}

/**
 * Three nodes pointed at a fresh platform simulator, with {@link LIVE_INSTANCES} live instances (an org on an
 * unlimited plan, a live key), each set up through a different node and linked by a QR scan to its own simulator
 * account; {@link LIVE_PEER} is a simulated user too. Resolves once every instance is connected and logged in. `env`
 * adds to or overrides the nodes' {@link clusterEnv} (a test of a graceful stop uses the production lease timing,
 * support.ts `GRACEFUL_LEASES`).
 */
export async function startLiveCluster(env: Record<string, string> = {}): Promise<LiveCluster> {
  const sim = await startTestSimulator();
  const testStore = await createTestStore('postgres');
  const receiver = await startReceiver();
  const nodeEnv = clusterEnv(testStore, {
    PLATFORM_URL: sim.url,
    PLATFORM_ROOT_KEY: sim.rootKey.toString('hex'),
    PLATFORM_CA_FILE: simCaFile(sim),
    ...env,
  });
  const nodes = await startNodes(nodeEnv, async () => {
    await receiver.close();
    await testStore.cleanup();
    await sim.close();
  });
  const { instances, key } = await seed(testStore, LIVE_INSTANCES, { unlimited: true, env: 'live' });
  const cluster: LiveCluster = {
    testStore,
    receiver,
    nodes,
    key,
    instanceIds: instances.map((instance) => instance.id),
    sim,
    phones: new Map(),
  };
  try {
    assert.equal((await control(sim, 'POST', '/users', { phone: LIVE_PEER, pushName: 'Peer' })).status, 201);
    for (const [i, instance] of instances.entries()) {
      const node = nodes[i % nodes.length];
      assert.ok(node);
      const phone = `55119200000${i}`;
      assert.equal((await control(sim, 'POST', '/users', { phone, pushName: `Shop ${i}` })).status, 201);
      await linkLive(cluster, node, instance.id, phone);
      cluster.phones.set(instance.id, phone);
    }
  } catch (error) {
    await stopAll(cluster);
    throw error;
  }
  return cluster;
}

/**
 * Calls `node`'s API until it answers something other than a 503 (the documented answer to ask again: a node whose
 * lease round ran past its fencing timer, or whose session of the instance was closed as the instance moved on a
 * loaded machine, docs/decisions/0008-leases-and-fencing.md), at most the safety net {@link WAIT_MS}; asserts that answer is a
 * 200 and resolves with it.
 */
async function untilAnswered(
  node: Child,
  key: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  let answer: { status: number; body: any } | undefined;
  await until(
    async () => {
      answer = await node.call(method, path, key, body);
      return answer.status !== 503;
    },
    WAIT_MS,
    `${method} ${path} answered other than 503`,
  );
  assert.ok(answer);
  assert.equal(answer.status, 200, `${path}: ${JSON.stringify(answer.body)}`);
  return answer;
}

/**
 * Connects `instanceId` through `node`, sets its HMAC key and webhook URL, scans its QR as account `phone` and
 * waits until `node` reports it connected and logged in: the safety net {@link WAIT_MS} at most, a bound on the
 * test's setup, not a figure the tests check (they time the failover). A link takes a few seconds, but six nodes, two
 * simulators and PostgreSQL sharing two cores with the other test files took it past 30 s in a full run. A 503 is asked again at each step ({@link untilAnswered}).
 */
async function linkLive(cluster: LiveCluster, node: Child, instanceId: string, phone: string): Promise<void> {
  const from = `?from=${instanceId}`;
  const connect = () => untilAnswered(node, cluster.key, 'POST', `/v1/session/connect${from}`, {});
  await connect();
  await untilAnswered(node, cluster.key, 'POST', `/v1/session/hmac/config${from}`, { hmacKey: HMAC_KEY });
  await untilAnswered(node, cluster.key, 'POST', `/v1/webhook${from}`, { webhookUrl: cluster.receiver.url });
  // The pairing is started again from its connect when it was lost on the way: its session closed as the instance moved
  // (the QR code answers 409 not connected, or 503), or the QR code read was gone by its scan (it rotated, or its
  // socket closed: 404 at the simulator). A loaded machine moves instances and stretches the time between the steps.
  let scan: { status: number; body: any } | undefined;
  await until(
    async () => {
      const qr = await node.call('GET', `/v1/session/qr${from}`, cluster.key);
      if (qr.status === 409 || qr.status === 503) {
        await connect();
        return false;
      }
      assert.equal(qr.status, 200, JSON.stringify(qr.body));
      scan = await control(cluster.sim, 'POST', '/scan', { code: qr.body.data.code, phone });
      return scan.status !== 404;
    },
    WAIT_MS,
    `${phone}: a QR code scanned`,
  );
  assert.equal(scan?.status, 200, JSON.stringify(scan?.body));
  await until(
    async () => {
      // A node whose lease round ran past its fencing timer (a loaded machine) answers 503 until it renews again
      // (docs/decisions/0008-leases-and-fencing.md): asked again at the next try.
      const answer = await node.call('GET', `/v1/session/status${from}`, cluster.key);
      if (answer.status !== 200) return false;
      const status = answer.body.data;
      return status.connected === true && status.loggedIn === true;
    },
    WAIT_MS,
    `${phone} linked`,
  );
}

/**
 * A live stream's request: a send goes through parley (`POST /v1/messages/send` to {@link LIVE_PEER}); an inbound
 * message is written by {@link LIVE_PEER} through the simulator's control API (`POST /messages`), whose 201 counts
 * as answered (status 200), with the simulator's message id. The simulator takes a message for a linked account
 * whether or not its device has a socket open (it keeps it until the device logs in again).
 */
export function liveRequest(cluster: LiveCluster): StreamRequest {
  return async (kind, instanceId, text, node) => {
    if (kind === 'send') {
      const sent = await call(node.port, 'POST', `/v1/messages/send?from=${instanceId}`, cluster.key, {
        phone: LIVE_PEER,
        body: text,
      }).catch(() => ({ status: 0, body: undefined }));
      return {
        status: sent.status,
        node: node.workerId,
        ...(sent.status === 200 ? { id: String(sent.body.data.id) } : {}),
      };
    }
    const written = await control(cluster.sim, 'POST', '/messages', {
      from: LIVE_PEER,
      to: cluster.phones.get(instanceId),
      text,
    }).catch(() => ({ status: 0, body: undefined }));
    return {
      status: written.status === 201 ? 200 : written.status,
      node: 'simulator',
      ...(written.status === 201 ? { id: String(written.body.id) } : {}),
    };
  };
}

/** Open sockets of each live account's companion devices, as the simulator's control API reports them. */
async function socketCounts(cluster: LiveCluster): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const phone of cluster.phones.values()) {
    const view = await control(cluster.sim, 'GET', `/accounts/${phone}`);
    const devices = view.body.devices as { id: number; sockets: number }[];
    counts.set(
      phone,
      devices.filter((device) => device.id !== 0).reduce((sum, device) => sum + device.sockets, 0),
    );
  }
  return counts;
}

/**
 * Polls every live account's open sockets (every 50 ms) until `stop` is called, which waits (10 s at most) until
 * each account has exactly one socket again and resolves with the most sockets each account ever had open at once.
 */
export function watchSockets(cluster: LiveCluster): { stop(): Promise<Map<string, number>> } {
  const most = new Map<string, number>();
  let stopped = false;
  const poll = async () => {
    const counts = await socketCounts(cluster);
    for (const [phone, count] of counts) most.set(phone, Math.max(most.get(phone) ?? 0, count));
    return counts;
  };
  const running = (async () => {
    while (!stopped) {
      await poll();
      await sleep(50);
    }
  })();
  return {
    async stop() {
      await until(
        async () => [...(await poll()).values()].every((count) => count === 1),
        WAIT_MS,
        'one socket per account',
      );
      stopped = true;
      await running;
      return most;
    },
  };
}

/** The node that held `instanceIds` was killed (SIGKILL); `at` is when its process was gone, epoch ms. */
export interface Killed {
  instanceIds: readonly string[];
  at: number;
}

/**
 * How long before a SIGKILL a message the killed node acknowledged to the platform may still have been waiting to
 * be stored, ms (see {@link assertLiveDelivered}).
 */
export const ACK_GAP_MS = 5000;

/**
 * The live stream's outcome was kept: every send answered 200 reached {@link LIVE_PEER} from its instance's account
 * (the simulator's inbox), every message the simulator took reached the receiver as a `Message` webhook, each under
 * one webhook-id only (a redelivery repeats it), and everything {@link assertDelivered} checks holds. Waits for
 * each up to the safety net {@link WAIT_MS}.
 *
 * One exception, with `killed`: the live engine (Baileys) sends the platform its delivery receipt for a message
 * before parley has stored it, so a message the killed node acknowledged within {@link ACK_GAP_MS} before it died
 * and never stored is gone (the platform does not deliver an acknowledged message again). Such a message is
 * allowed only when the simulator recorded that node's receipt for it before the kill and parley has no row for
 * it; resolves with those messages.
 */
export async function assertLiveDelivered(
  cluster: LiveCluster,
  outcomes: readonly Outcome[],
  killed?: Killed,
): Promise<Outcome[]> {
  const db = cluster.testStore.store.db;
  const sent = outcomes.filter((o) => o.kind === 'send' && o.id !== undefined);
  const written = outcomes.filter((o) => o.kind === 'inbound' && o.id !== undefined);
  let inbox: InboxEntry[] = [];
  const missing = () =>
    sent.filter((o) => !inbox.some((e) => e.id === o.id && e.from === cluster.phones.get(o.instanceId)));
  await until(
    async () => {
      inbox = (await control(cluster.sim, 'GET', `/users/${LIVE_PEER}/inbox`)).body;
      return missing().length === 0;
    },
    WAIT_MS,
    'every send answered 200 in the recipient inbox',
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}: ${JSON.stringify(missing())}`);
  });
  const webhookIds = () => webhookIdsByMessage(cluster.receiver.requests);
  // Acknowledged by the killed node shortly before it died (its delivery receipt reached the simulator).
  const ackedBeforeKill = (o: Outcome) => {
    if (!killed?.instanceIds.includes(o.instanceId)) return false;
    return inbox.some(
      (e) =>
        e.type === 'receipt' &&
        e.from === cluster.phones.get(o.instanceId) &&
        (e.ids ?? [e.id]).includes(o.id ?? '') &&
        Date.parse(e.timestamp) <= killed.at &&
        Date.parse(e.timestamp) >= killed.at - ACK_GAP_MS,
    );
  };
  let undelivered: Outcome[] = [];
  let lost: Outcome[] = [];
  await until(
    async () => {
      const ids = webhookIds();
      undelivered = written.filter((o) => !ids.has(o.id ?? ''));
      if (undelivered.length === 0) return true;
      inbox = (await control(cluster.sim, 'GET', `/users/${LIVE_PEER}/inbox`)).body;
      const stored = new Set(
        (
          await db
            .selectFrom('messages')
            .select('id')
            .where(
              'id',
              'in',
              undelivered.map((o) => o.id ?? ''),
            )
            .execute()
        ).map((row) => row.id),
      );
      lost = undelivered.filter((o) => ackedBeforeKill(o) && !stored.has(o.id ?? ''));
      return lost.length === undelivered.length;
    },
    WAIT_MS,
    'every inbound message delivered',
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}: ${JSON.stringify(undelivered)}`);
  });
  const ids = webhookIds();
  for (const o of written) {
    if (!lost.includes(o)) assert.equal(ids.get(o.id ?? '')?.size, 1, `message ${o.id} under one webhook-id`);
  }
  await assertDelivered(
    cluster,
    sent.map((o) => o.id ?? ''),
  );
  return lost;
}
