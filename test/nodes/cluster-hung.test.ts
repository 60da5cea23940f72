import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PEER } from '../messages/support.ts';
import { testDialects } from '../support/store.ts';
import { type Cluster, owners, startCluster, stoppedAfterEach } from './support.ts';

/**
 * A request forwarded to a node that hangs with its connections open (SIGSTOP: a frozen machine, a partition), where
 * no closed connection tells the forwarder it will not answer (docs/decisions/0008-leases-and-fencing.md, "A forward
 * that loses its connection"). Three real nodes on one PostgreSQL schema with the test leases (3 s lifetime). The
 * forwarder stops waiting once the hung node's lease expired: the send, done once per forward id, is forwarded again
 * to the instance's new owner and sent once, within the failover's time, instead of waiting for undici's 300 s.
 */

/**
 * How long the send may take, ms: the lease's lifetime, a heartbeat, the new owner's restore, on a loaded two-core
 * machine (about 3.4 s measured unloaded), far below the 300 s a forward used to wait.
 */
const ANSWER_BOUND_MS = 30_000;

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`three nodes on ${dialect}: a node that hangs`, () => {
    const clusters = stoppedAfterEach<Cluster>();

    it('a send forwarded to a node that hangs is sent once by the new owner, not held', async (t) => {
      const cluster = await startCluster();
      clusters.push(cluster);
      const [receiving, hung] = cluster.nodes;
      assert.ok(receiving && hung);
      const instanceId = [...(await owners(cluster))].find(([, owner]) => owner === hung.workerId)?.[0];
      assert.ok(instanceId, 'the hung node holds an instance');
      const { db } = cluster.testStore.store;
      const sent = () =>
        db
          .selectFrom('messages')
          .select('id')
          .where('instance_id', '=', instanceId)
          .where('from_me', '=', 1)
          .execute();
      const before = (await sent()).map((row) => row.id);
      hung.pause();
      try {
        const startedAt = Date.now();
        const response = await fetch(
          `http://127.0.0.1:${receiving.port}/v1/messages/send?from=${instanceId}`,
          {
            method: 'POST',
            headers: {
              authorization: `Bearer ${cluster.key}`,
              'content-type': 'application/json',
              'idempotency-key': 'hung-owner-1',
            },
            body: JSON.stringify({ phone: PEER, body: 'to a hung owner' }),
            signal: AbortSignal.timeout(90_000),
          },
        );
        const took = Date.now() - startedAt;
        const body = await response.text();
        const logs = cluster.nodes.map((node) => `--- ${node.workerId}:\n${node.stderr()}`).join('\n');
        assert.equal(response.status, 200, `${body}\n${logs}`);
        t.diagnostic(`answered in ${took} ms`);
        assert.ok(took < ANSWER_BOUND_MS, `answered in ${took} ms`);
        const { id } = JSON.parse(body).data as { id: string };
        assert.deepEqual(
          (await sent()).map((row) => row.id).filter((sentId) => !before.includes(sentId)),
          [id],
          'sent once',
        );
        assert.notEqual((await owners(cluster)).get(instanceId), hung.workerId, 'the instance moved');
      } finally {
        hung.resume();
      }
    });
  });
}
