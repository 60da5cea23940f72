import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sseReader } from '../support/sse.ts';
import { testDialects } from '../support/store.ts';
import { openWs } from '../support/ws.ts';
import { PEER } from '../webhooks/child.ts';
import { type Cluster, owners, startCluster, stoppedAfterEach } from './support.ts';

/**
 * The event stream on several nodes (docs/decisions/0031-event-stream.md, docs/decisions/0008-leases-and-fencing.md):
 * a stream is served by the node the client reached, never forwarded, and reads the shared store, so an event
 * recorded on the node holding the instance reaches streams opened on the two other nodes (read within a second,
 * by the idle poll), each exactly as the event log shows it.
 */
for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`event stream across three nodes (${dialect})`, () => {
    const clusters = stoppedAfterEach<Cluster>();

    it('an event recorded on the owner reaches a WebSocket and an SSE stream opened on the other nodes', async () => {
      const cluster = await startCluster();
      clusters.push(cluster);
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
    });
  });
}
