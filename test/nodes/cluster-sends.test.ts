import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { control } from '../live/support.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { LIVE_PEER, type LiveCluster, startLiveCluster } from './live-cluster.ts';
import { stoppedAfterEach, WAIT_MS } from './support.ts';

/**
 * Sends as jobs across a node's death (docs/decisions/0009-sends-as-jobs.md): 40 live sends queued on the node that
 * holds a live instance (real Baileys against the platform simulator), paced so most are still pending, then that
 * node is killed with SIGKILL. The instance's new holder relays what was left, under the same ids: the simulated
 * recipient's inbox has each of the 40 ids exactly once, and every job ends `sent`.
 */

/** Sends queued before the kill. */
const QUEUED = 40;

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`queued live sends through a SIGKILL on three nodes (${dialect})`, () => {
    const clusters = stoppedAfterEach<LiveCluster>();

    it('40 queued live sends cut by SIGKILL arrive once each, relayed by the new owner under their ids', async (t) => {
      const cluster = await startLiveCluster();
      clusters.push(cluster);
      const db = cluster.testStore.store.db;
      const victim = cluster.nodes[0];
      assert.ok(victim);
      const lease = await db
        .selectFrom('instance_leases')
        .select('instance_id')
        .where('owner', '=', victim.workerId)
        .executeTakeFirstOrThrow();
      const from = `?from=${lease.instance_id}`;
      const paced = await victim.call('PUT', `/v1/session/pacing${from}`, cluster.key, {
        minIntervalMs: 150,
      });
      assert.equal(paced.status, 200, JSON.stringify(paced.body));

      const ids: string[] = [];
      for (let i = 0; i < QUEUED; i++) {
        const response = await fetch(`http://127.0.0.1:${victim.port}/v1/messages/send${from}`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${cluster.key}`,
            'content-type': 'application/json',
            prefer: 'respond-async',
          },
          body: JSON.stringify({ phone: LIVE_PEER, body: `queued ${i}` }),
        });
        const body = (await response.json()) as { data: { id: string } };
        assert.equal(response.status, 202, JSON.stringify(body));
        ids.push(body.data.id);
      }
      const sentCount = async () =>
        (
          await db
            .selectFrom('send_jobs')
            .select('id')
            .where('instance_id', '=', lease.instance_id)
            .where('status', '=', 'sent')
            .execute()
        ).length;
      await eventually('a few relays before the kill', async () => (await sentCount()) >= 3, WAIT_MS);
      await victim.kill();
      const atKill = await sentCount();
      t.diagnostic(`${atKill} of ${QUEUED} sent when the node was killed`);
      assert.ok(atKill < QUEUED, 'sends were still queued when the node died');

      await eventually(
        'every queued send relayed by the new owner',
        async () => (await sentCount()) === QUEUED,
        WAIT_MS,
      );
      const inbox = await eventually(
        'every id in the inbox',
        async () => {
          const view = await control(cluster.sim, 'GET', `/users/${LIVE_PEER}/inbox`);
          const entries = (view.body as { id: string; text?: string; copies?: number }[]).filter((entry) =>
            ids.includes(entry.id),
          );
          return entries.length >= QUEUED ? entries : undefined;
        },
        WAIT_MS,
      );
      assert.deepEqual(
        inbox.map((entry) => entry.id).sort(),
        [...ids].sort(),
        "each queued id exactly once in the recipient's inbox",
      );
      assert.deepEqual(
        ids.map((id) => inbox.find((entry) => entry.id === id)?.text),
        ids.map((_, i) => `queued ${i}`),
        'each id carries its own text',
      );
      const copies = inbox.reduce((sum, entry) => sum + (entry.copies ?? 0), 0);
      t.diagnostic(`${copies} relays repeated an id the recipient already had (shown once)`);
      const owner = await db
        .selectFrom('instance_leases')
        .select('owner')
        .where('instance_id', '=', lease.instance_id)
        .executeTakeFirstOrThrow();
      assert.notEqual(owner.owner, victim.workerId, 'another node holds the instance');
    });
  });
}
