import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gatewaySignature } from '../../src/http/gateway/signature.ts';
import { testDialects } from '../support/store.ts';
import { HMAC_KEY } from '../webhooks/support.ts';
import {
  assertDelivered,
  assertFailover,
  type Cluster,
  owners,
  perNodeCounts,
  startCluster,
  startTraffic,
  stoppedAfterEach,
} from './support.ts';

/**
 * Several nodes (docs/decisions/0008-leases-and-fencing.md), end to end: three real parley processes sharing one
 * PostgreSQL schema (and Redis when TEST_REDIS_URL is set), sandbox instances spread across them, a steady stream of
 * sends and inbound messages through every node, then one node is killed with SIGKILL. The client stops using the
 * node the moment it is killed, as a load balancer does once its health check fails (the graceful stop is in
 * cluster-term.test.ts).
 */

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`three nodes on ${dialect}: a node killed`, () => {
    const clusters = stoppedAfterEach<Cluster>();

    it('spreads instances, answers for every instance on every node, and survives SIGKILL of a node', async (t) => {
      const cluster = await startCluster();
      clusters.push(cluster);
      const placed = await owners(cluster);
      assert.deepEqual(perNodeCounts(placed), [2, 2, 2], 'two instances per node');

      // A node that does not own an instance answers for it as its owner does: same envelope and request id.
      const [n1, n2] = cluster.nodes;
      assert.ok(n1 && n2);
      const remote = [...placed].find(([, owner]) => owner === n2.workerId)?.[0] ?? '';
      const status = await fetch(`http://127.0.0.1:${n1.port}/v1/session/status?from=${remote}`, {
        headers: { authorization: `Bearer ${cluster.key}`, 'x-request-id': 'forward-check-1' },
      });
      assert.equal(status.status, 200);
      assert.equal(status.headers.get('x-request-id'), 'forward-check-1');
      const statusBody = (await status.json()) as { data: { connected: boolean; instanceId: string } };
      assert.equal(statusBody.data.instanceId, remote);
      assert.equal(statusBody.data.connected, true, 'the owner, which has the session, answered');
      // A signed gateway request is verified where it arrives and answered by the owner.
      const timestamp = String(Math.floor(Date.now() / 1000));
      const signature = gatewaySignature(HMAC_KEY, {
        timestamp,
        method: 'GET',
        pathWithQuery: '/session/status',
        body: Buffer.alloc(0),
      }).toString('hex');
      const gateway = await fetch(`http://127.0.0.1:${n1.port}/session/status`, {
        headers: {
          authorization: `Bearer ${cluster.key}`,
          'x-instance-id': remote,
          'x-timestamp': timestamp,
          'x-signature': signature,
        },
      });
      assert.equal(gateway.status, 200);
      const gatewayBody = (await gateway.json()) as { data: { connected: boolean; instanceId: string } };
      assert.equal(gatewayBody.data.instanceId, remote);
      assert.equal(gatewayBody.data.connected, true, 'the owner answered the gateway request');
      // A request pretending to come from another node without the cluster secret is refused.
      const forged = await fetch(`http://127.0.0.1:${n1.port}/v1/session/status?from=${remote}`, {
        headers: {
          authorization: `Bearer ${cluster.key}`,
          'x-parley-forwarded-by': 'n2',
          'x-parley-cluster-secret': 'not-the-secret',
        },
      });
      assert.equal(forged.status, 401);
      assert.deepEqual(await forged.json(), {
        error: { code: 401, message: 'node-to-node call without a valid cluster secret' },
      });

      const traffic = await startTraffic(cluster, { atLeast: 24 });
      const { outcomes } = traffic;
      const victim = cluster.nodes[0];
      assert.ok(victim);
      const victimInstances = [...placed].filter(([, owner]) => owner === victim.workerId).map(([id]) => id);
      assert.equal(victimInstances.length, 2);
      traffic.without(victim);
      const killedAt = Date.now();
      await victim.kill();
      const goneAt = Date.now();
      // Every instance of the dead node answers 200 again, through the surviving nodes.
      for (const [id, ms] of await assertFailover(outcomes, victimInstances, killedAt)) {
        t.diagnostic(`failover of ${id}: ${ms} ms`);
      }
      // Some more traffic on the new owners, then stop.
      await traffic.more(12, 'traffic after failover');
      await traffic.stop();
      // Only requests in flight on the dead node (received by it, or forwarded to it) may have failed.
      const failedElsewhere = outcomes.filter(
        (o) => o.status !== 200 && o.node !== victim.workerId && !victimInstances.includes(o.instanceId),
      );
      assert.deepEqual(failedElsewhere, []);
      // A request started once the process is gone waits for the failover instead of failing.
      assert.deepEqual(
        outcomes.filter((o) => o.status !== 200 && o.startedAt > goneAt),
        [],
      );
      const after = await owners(cluster);
      for (const id of victimInstances) assert.notEqual(after.get(id), victim.workerId);
      await assertDelivered(
        cluster,
        outcomes.flatMap((o) => (o.id ? [o.id] : [])),
      );
    });
  });
}
