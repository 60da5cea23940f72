import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testDialects } from '../support/store.ts';
import { type Child, until } from '../webhooks/child.ts';
import { haproxySuite } from './haproxy.ts';
import {
  assertDelivered,
  type Cluster,
  type Outcome,
  owners,
  startCluster,
  stoppedAfterEach,
  stream,
} from './support.ts';

/**
 * Several nodes (DESIGN D17), end to end: three real parley processes sharing one PostgreSQL schema (and Redis when
 * TEST_REDIS_URL is set), sandbox instances spread across them, a steady stream of sends and inbound messages
 * through every node, then one node is stopped with SIGTERM: it hands its instances over and no request fails. The
 * client stops using the node the moment it is stopped, as a load balancer does once its health check fails; the
 * HAProxy suite (./haproxy.ts) runs the same with HAProxy in front.
 */

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`three nodes on ${dialect}: graceful stop`, () => {
    const clusters = stoppedAfterEach<Cluster>();

    it('on SIGTERM hands its instances over with no failed request at all', async (t) => {
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
      const terminating = Date.now();
      const code = await leaving.terminate();
      t.diagnostic(`SIGTERM to exit: ${Date.now() - terminating} ms`);
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

haproxySuite();
