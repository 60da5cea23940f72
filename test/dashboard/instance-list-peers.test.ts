import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { claimLease, setNodeEndpoint } from '../../src/store/leases.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createUser, signIn } from './support.ts';

/**
 * The dashboard's instance list on a cluster node whose peer hangs (docs/decisions/0008-leases-and-fencing.md, "A
 * node that does not answer"): the list asks each other node holding some of the organization's instances for their
 * status. A peer that accepts the connection and never answers holds the list only up to the ask's bound
 * (`CLUSTER_ASK_TIMEOUT_SECONDS`), or until that peer's lease expired (`LeaseKeeper.ownerLost`), whichever comes
 * first; the list then answers 200 with what is known, the hung node's instances marked `unreachable`. The app is a
 * cluster node that serves nothing to the others (its keeper is not started); the peer is a node row, its endpoint
 * and a lease written in the store.
 */

const SECRET = 'hung-peer-cluster-secret-0123456789abcdef';

/** A TCP server on the loopback that accepts every connection, reads what comes and never writes a byte. */
async function silentPeer() {
  const sockets = new Set<Socket>();
  let asked = 0;
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('data', () => {
      asked += 1;
    });
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}`,
    /** Connections a request came on so far. */
    asked: () => asked,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * A new instance of `t`'s organization leased to node `hung-node` (live, serving at `url`) until `leaseMs` from now,
 * as that node would hold it.
 */
async function leasedToPeer(t: TestApp, url: string, leaseMs: number) {
  const db = t.testStore.store.db;
  const instance = await t.newInstance('test', 'on-the-hung-node');
  await upsertNode(db, {
    id: 'hung-node',
    host: 'h',
    pid: 1,
    startedAt: new Date().toISOString(),
    heartbeatAt: Date.now(),
  });
  await setNodeEndpoint(db, 'hung-node', { url, draining: false });
  const lease = await claimLease(db, {
    instanceId: instance.id,
    owner: 'hung-node',
    previousToken: null,
    expiresAt: Date.now() + leaseMs,
  });
  assert.ok(lease, 'the peer holds the lease');
  return instance;
}

/** The list's rows as [id, connected, loggedIn, unreachable]. */
function rows(body: { data: { instances: Record<string, unknown>[] } }) {
  return body.data.instances.map((row) => [row.id, row.connected, row.loggedIn, row.unreachable ?? false]);
}

for (const dialect of testDialects()) {
  describe(`the dashboard's instance list with a peer that hangs, on ${dialect}`, () => {
    it('answers within the ask bound with what is known, the hung node’s instance marked unreachable', {
      timeout: 30_000,
    }, async () => {
      const peer = await silentPeer();
      const t = await createTestApp({
        dialect,
        env: { CLUSTER_SECRET: SECRET, CLUSTER_ASK_TIMEOUT_SECONDS: '0.3' },
      });
      try {
        const viewer = await signIn(t, await createUser(t, 'viewer'));
        const remote = await leasedToPeer(t, peer.url, 600_000);
        const list = await viewer.call('GET', '/instances');
        assert.equal(list.status, 200, JSON.stringify(list.body));
        assert.deepEqual(rows(list.body), [
          [t.instance.id, false, false, false],
          [remote.id, false, false, true],
        ]);
        // The usual envelope; the last events come from the store, so the hung node is not needed for them.
        assert.deepEqual([list.body.success, list.body.code, list.body.data.lastEvents], [true, 200, {}]);
        assert.equal(peer.asked(), 1, 'the peer was asked once');
      } finally {
        await t.close();
        await peer.close();
      }
    });

    it('answers once the hung node’s lease expired, before a longer ask bound', {
      timeout: 30_000,
    }, async () => {
      const peer = await silentPeer();
      const t = await createTestApp({
        dialect,
        // The bound (60 s) outlasts the test's own time limit: only the lease's end can answer the list in time.
        env: { CLUSTER_SECRET: SECRET, CLUSTER_ASK_TIMEOUT_SECONDS: '60' },
        cluster: { heartbeatMs: 100, ttlMs: 300 },
      });
      try {
        const viewer = await signIn(t, await createUser(t, 'viewer'));
        const remote = await leasedToPeer(t, peer.url, 1_000);
        const list = await viewer.call('GET', '/instances');
        assert.equal(list.status, 200, JSON.stringify(list.body));
        assert.deepEqual(rows(list.body), [
          [t.instance.id, false, false, false],
          [remote.id, false, false, true],
        ]);
        assert.equal(peer.asked(), 1, 'the peer was asked once');
      } finally {
        await t.close();
        await peer.close();
      }
    });
  });
}
