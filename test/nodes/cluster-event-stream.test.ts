import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import { eventually } from '../support/eventually.ts';
import { sseReader } from '../support/sse.ts';
import { testDialects } from '../support/store.ts';
import { openWs } from '../support/ws.ts';
import { PEER } from '../webhooks/child.ts';
import { type Cluster, owners, startCluster, stoppedAfterEach } from './support.ts';

/**
 * The event stream on several nodes (docs/decisions/0031-event-stream.md, docs/decisions/0008-leases-and-fencing.md):
 * a stream is served by the node the client reached, never forwarded, and reads the shared store, so an event
 * recorded on the node holding the instance reaches streams opened on the two other nodes, each exactly as the event
 * log shows it: told at once by the store's signals (docs/decisions/0078-store-signals.md), or read within a second
 * by the idle poll. The poll is shown without the signals (nodes behind a transaction-mode pooler open none), the
 * signals with polls far longer than the test waits, and so is a revocation.
 */

/** Far longer than any wait of these tests, ms: what reaches the nodes meanwhile came by the store's signals. */
const NEVER_MS = '600000';

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`event stream across three nodes (${dialect})`, () => {
    const clusters = stoppedAfterEach<Cluster>();

    /** How many nodes of `cluster` hold a signals connection to its store (`pg_stat_activity`). */
    const listening = async (cluster: Cluster): Promise<number> => {
      const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and application_name like 'parley-signals %'`.execute(
        cluster.testStore.store.db,
      );
      return rows[0]?.n ?? 0;
    };

    /** An event recorded on the owner of an instance, read from streams opened on the two other nodes. */
    const streamedElsewhere = async (cluster: Cluster) => {
      const placed = await owners(cluster);
      const instanceId = cluster.instanceIds[0];
      assert.ok(instanceId);
      const owner = cluster.nodes.find((node) => node.workerId === placed.get(instanceId));
      const [first, second] = cluster.nodes.filter((node) => node !== owner);
      assert.ok(owner && first && second, 'the instance is held by one of the three nodes');

      const from = `from=${instanceId}`;
      const head = await first.call('GET', `/v1/events?${from}&types=Message`, cluster.key);
      assert.equal(head.status, 200, JSON.stringify(head.body));
      const after = head.body.data.next as number;
      const headers = { authorization: `Bearer ${cluster.key}` };
      const path = `/v1/events/stream?${from}&after=${after}&types=Message`;
      const client = await openWs(`ws://127.0.0.1:${first.port}${path}`, headers);
      const response = await fetch(`http://127.0.0.1:${second.port}${path}`, {
        headers: { ...headers, accept: 'text/event-stream' },
      });
      assert.equal(response.status, 200);
      assert.ok(response.body);
      const reader = sseReader(response.body);
      try {
        const sent = await owner.call('POST', `/v1/sandbox/inbound?${from}`, cluster.key, {
          phone: PEER,
          body: 'recorded on the owner',
        });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        const frame = await client.next();
        const event = await reader.next('Message');
        const log = await owner.call('GET', `/v1/events?${from}&after=${after}&types=Message`, cluster.key);
        const [entry] = log.body.data.events;
        assert.equal(entry.event.message.conversation, 'recorded on the owner');
        assert.equal(frame, JSON.stringify(entry), 'the WebSocket frame is the log entry');
        assert.equal(event.text, JSON.stringify(entry), 'the SSE data is the log entry');
        assert.equal(event.id, String(entry.sequence));
        assert.deepEqual(client.pending(), []);
      } finally {
        client.socket.close();
        await reader.cancel();
      }
    };

    it('without the signals, the idle poll brings an event recorded on the owner to streams on the other nodes', async () => {
      // As behind PgBouncer in transaction mode (docs/decisions/0055-named-statements.md): no listening session.
      const cluster = await startCluster({ DATABASE_PREPARED_STATEMENTS: 'off' });
      clusters.push(cluster);
      assert.equal(await listening(cluster), 0);
      await streamedElsewhere(cluster);
    });

    it('with polls longer than the test, the store signals the event to the other nodes, and a revocation to all', async () => {
      const cluster = await startCluster({
        CHILD_STREAM_POLL_MS: NEVER_MS,
        CHILD_REVOCATION_POLL_MS: NEVER_MS,
      });
      clusters.push(cluster);
      await eventually('each node listens', async () =>
        (await listening(cluster)) === 3 ? true : undefined,
      );
      await streamedElsewhere(cluster);
      // Every node verified the key and cached it; it is revoked as the command line does, in a process of its own.
      const read = `/v1/events?from=${cluster.instanceIds[0]}&limit=1`;
      for (const node of cluster.nodes) {
        const answer = await node.call('GET', read, cluster.key);
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
      }
      const [key, more] = await cluster.testStore.store.db.selectFrom('api_keys').select('id').execute();
      assert.ok(key && more === undefined, 'the cluster has one key');
      assert.ok((await revokeApiKey(cluster.testStore.store.db, key.id))?.revokedAt);
      for (const node of cluster.nodes) {
        await eventually(`${node.workerId} refuses the revoked key`, async () => {
          const answer = await node.call('GET', read, cluster.key);
          return answer.status === 401 ? answer : undefined;
        });
      }
    });
  });
}
