import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testDialects } from '../support/store.ts';
import { haproxySuite } from './haproxy.ts';
import {
  assertDelivered,
  type Cluster,
  failedRequests,
  GRACEFUL_LEASES,
  owners,
  startCluster,
  startTraffic,
  stoppedAfterEach,
} from './support.ts';

/**
 * Several nodes (docs/decisions/0008-leases-and-fencing.md), end to end: three real parley processes sharing one
 * PostgreSQL schema (and Redis when TEST_REDIS_URL is set), sandbox instances spread across them, a steady stream of
 * sends and inbound messages through every node, then one node is stopped with SIGTERM: it hands its instances over
 * and no request fails. The client stops using the node the moment it is stopped, as a load balancer does once its
 * health check fails; the HAProxy suite (./haproxy.ts) runs the same with HAProxy in front.
 */

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`three nodes on ${dialect}: graceful stop`, () => {
    const clusters = stoppedAfterEach<Cluster>();

    it('on SIGTERM hands its instances over with no failed request at all', async (t) => {
      const cluster = await startCluster(GRACEFUL_LEASES);
      clusters.push(cluster);
      const traffic = await startTraffic(cluster, { atLeast: 24 });
      const { outcomes } = traffic;
      const leaving = cluster.nodes[1];
      assert.ok(leaving);
      traffic.without(leaving);
      const terminating = Date.now();
      const code = await leaving.terminate();
      t.diagnostic(`SIGTERM to exit: ${Date.now() - terminating} ms`);
      assert.equal(code, 0);
      await traffic.more(24, 'traffic after the hand-over');
      await traffic.stop();
      assert.deepEqual(
        outcomes.filter((o) => o.status !== 200),
        [],
        failedRequests(cluster, outcomes),
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

haproxySuite();
