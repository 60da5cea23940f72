import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { control } from '../live/support.ts';
import { testDialects } from '../support/store.ts';
import type { Child } from '../webhooks/child.ts';
import {
  assertLiveDelivered,
  LIVE_INSTANCES,
  type LiveCluster,
  liveRequest,
  startLiveCluster,
  watchSockets,
} from './live-cluster.ts';
import {
  assertFailover,
  GRACEFUL_LEASES,
  owners,
  perNodeCounts,
  startTraffic,
  stoppedAfterEach,
} from './support.ts';

/**
 * Live instances (the real Baileys engine) on three nodes against the platform simulator
 * (docs/decisions/0008-leases-and-fencing.md), end to end: one live instance per node, each linked to its own
 * simulator account, under a steady stream of sends through parley (to a simulated user) and messages from that user
 * (through the simulator), while one node is killed with SIGKILL or stopped with SIGTERM. The simulator's account
 * view is polled throughout: no account ever has two sockets open. The client stops using the node the moment it is
 * stopped, as a load balancer does once its health check fails.
 */

/** Successful requests of the stream before the node is stopped, and after the failover. */
const TRAFFIC = 12;

/** Instances whose lease `node` holds, with the lease's token. */
async function leasesOf(cluster: LiveCluster, node: Child): Promise<Map<string, string>> {
  const rows = await cluster.testStore.store.db
    .selectFrom('instance_leases')
    .selectAll()
    .where('owner', '=', node.workerId)
    .execute();
  return new Map(rows.map((row) => [row.instance_id, String(row.token)]));
}

/** No new device was linked: each account still has its phone (device 0) and the one companion (device 1). */
async function assertNoNewScan(cluster: LiveCluster): Promise<void> {
  for (const phone of cluster.phones.values()) {
    const view = await control(cluster.sim, 'GET', `/accounts/${phone}`);
    assert.deepEqual(
      (view.body.devices as { id: number; linked: boolean }[]).map((device) => [device.id, device.linked]),
      [
        [0, true],
        [1, true],
      ],
      `${phone}: the same companion device`,
    );
  }
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`live instances on three nodes (${dialect})`, () => {
    const clusters = stoppedAfterEach<LiveCluster>();

    it('under traffic, a node killed with SIGKILL: its instances answer again within 15 s, nothing lost, never two sockets', async (t) => {
      const cluster = await startLiveCluster();
      clusters.push(cluster);
      const placed = await owners(cluster);
      assert.deepEqual(perNodeCounts(placed), [1, 1, 1], 'one live instance per node');
      assert.equal(placed.size, LIVE_INSTANCES);

      const sockets = watchSockets(cluster);
      const traffic = await startTraffic(cluster, { atLeast: TRAFFIC, request: liveRequest(cluster) });
      const { outcomes } = traffic;
      const victim = cluster.nodes[0];
      assert.ok(victim);
      const before = await leasesOf(cluster, victim);
      const victimInstances = [...before.keys()];
      assert.equal(victimInstances.length, 1);
      traffic.without(victim);
      const killedAt = Date.now();
      await victim.kill();
      const goneAt = Date.now();
      // The dead node's instance sends again through the surviving nodes (messages from the user are taken by the
      // simulator all along, so only sends tell).
      for (const [id, ms] of await assertFailover(outcomes, victimInstances, killedAt, ['send'])) {
        t.diagnostic(`live failover of ${id}: ${ms} ms`);
      }
      await traffic.more(TRAFFIC, 'traffic after failover');
      await traffic.stop();
      const most = await sockets.stop();
      assert.deepEqual([...most.values()], [1, 1, 1], 'never two sockets for one account');

      // Only sends in flight on the dead node (received by it, or forwarded to it) may have failed; the simulator
      // took every message of the user.
      assert.deepEqual(
        outcomes.filter(
          (o) => o.status !== 200 && o.node !== victim.workerId && !victimInstances.includes(o.instanceId),
        ),
        [],
      );
      assert.deepEqual(
        outcomes.filter((o) => o.kind === 'inbound' && o.status !== 200),
        [],
      );
      // A send started once the process is gone waits for the failover instead of failing.
      assert.deepEqual(
        outcomes.filter((o) => o.status !== 200 && o.startedAt > goneAt),
        [],
      );
      const after = await owners(cluster);
      const moved = await cluster.testStore.store.db
        .selectFrom('instance_leases')
        .selectAll()
        .where('instance_id', 'in', victimInstances)
        .execute();
      for (const lease of moved) {
        assert.notEqual(after.get(lease.instance_id), victim.workerId);
        assert.ok(Number(lease.token) > Number(before.get(lease.instance_id)), 'the fencing token grew');
      }
      await assertNoNewScan(cluster);
      const lost = await assertLiveDelivered(cluster, outcomes, { instanceIds: victimInstances, at: goneAt });
      t.diagnostic(`messages acknowledged by the killed node and never stored: ${lost.length}`);
    });

    it('under traffic, a node stopped with SIGTERM hands its live instance over with no failed request', async (t) => {
      // The production lease timing: with the test's fast leases a loaded machine delays a renewal past the fencing
      // timer, and the fenced node answers 503 for its instances (docs/decisions/0008-leases-and-fencing.md), which
      // this test, allowing no failed request, would count; a graceful stop hands over explicitly, needing no expiry.
      const cluster = await startLiveCluster(GRACEFUL_LEASES);
      clusters.push(cluster);
      const sockets = watchSockets(cluster);
      const traffic = await startTraffic(cluster, { atLeast: TRAFFIC, request: liveRequest(cluster) });
      const { outcomes } = traffic;
      const leaving = cluster.nodes[1];
      assert.ok(leaving);
      assert.equal((await leasesOf(cluster, leaving)).size, 1);
      traffic.without(leaving);
      const terminating = Date.now();
      assert.equal(await leaving.terminate(), 0);
      t.diagnostic(`SIGTERM to exit: ${Date.now() - terminating} ms`);
      await traffic.more(TRAFFIC, 'traffic after the hand-over');
      await traffic.stop();
      const most = await sockets.stop();
      assert.deepEqual([...most.values()], [1, 1, 1], 'never two sockets for one account');
      assert.deepEqual(
        outcomes.filter((o) => o.status !== 200),
        [],
        'no failed request',
      );
      assert.equal((await leasesOf(cluster, leaving)).size, 0, 'no lease left on the stopped node');
      await assertNoNewScan(cluster);
      assert.deepEqual(await assertLiveDelivered(cluster, outcomes), [], 'no message lost');
    });
  });
}
