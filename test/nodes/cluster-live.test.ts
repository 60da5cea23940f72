import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adminCreateInstance, adminCreateKey, adminCreateOrg } from '../../src/admin/admin.ts';
import { control, simCaFile, startTestSimulator } from '../live/support.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { type Child, childEnv, newSecretKey, startChild, until } from '../webhooks/child.ts';

/**
 * A live instance (the real Baileys engine) on three nodes against the platform simulator: linked through a node
 * that does not hold it, its node is killed with SIGKILL, and another node reconnects it from the stored
 * credentials (no new scan) within 15 s, while the simulator never sees two open sockets for its device.
 */

const SHOP = '5511977770001';

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`a live instance on three nodes (${dialect})`, () => {
    it('moves to another node within 15 s of a SIGKILL, without a new scan and never with two sockets', async (t) => {
      const sim = await startTestSimulator();
      const testStore = await createTestStore('postgres');
      const nodes: Child[] = [];
      try {
        await control(sim, 'POST', '/users', { phone: SHOP, pushName: 'Shop' });
        const env = {
          ...childEnv(testStore, newSecretKey()),
          CLUSTER_SECRET: 'test-cluster-secret-0123456789abcdef',
          CHILD_LEASE_HEARTBEAT_MS: '500',
          CHILD_LEASE_TTL_MS: '3000',
          PLATFORM_URL: sim.url,
          PLATFORM_ROOT_KEY: sim.rootKey.toString('hex'),
          PLATFORM_CA_FILE: simCaFile(sim),
        };
        for (const id of ['n1', 'n2', 'n3']) nodes.push(await startChild(env, id));
        const db = testStore.store.db;
        const org = await adminCreateOrg(db, { name: 'live-cluster', plan: 'pro' });
        const instance = await adminCreateInstance(db, { org: org.id, env: 'live', name: 'shop' });
        const { key } = await adminCreateKey(db, { org: org.id, env: 'live' }, Date.now());
        const from = `?from=${instance.id}`;
        let maxSockets = 0;
        const sockets = async () => {
          const view = await control(sim, 'GET', `/accounts/${SHOP}`);
          const count = (view.body.devices as { sockets: number }[])
            .slice(1)
            .reduce((sum, device) => sum + device.sockets, 0);
          maxSockets = Math.max(maxSockets, count);
          return count;
        };
        const status = async (node: Child) =>
          (await node.call('GET', `/v1/session/status${from}`, key)).body.data;

        // Linked through n1, whichever node holds it.
        const [n1] = nodes;
        assert.ok(n1);
        assert.equal((await n1.call('POST', `/v1/session/connect${from}`, key, {})).status, 200);
        const qr = await n1.call('GET', `/v1/session/qr${from}`, key);
        assert.equal(qr.status, 200, JSON.stringify(qr.body));
        assert.equal(
          (await control(sim, 'POST', '/scan', { code: qr.body.data.code, phone: SHOP })).status,
          200,
        );
        await until(
          async () => {
            const s = await status(n1);
            await sockets();
            return s.connected === true && s.loggedIn === true;
          },
          30_000,
          'linked',
        );
        const lease = await db
          .selectFrom('instance_leases')
          .selectAll()
          .where('instance_id', '=', instance.id)
          .executeTakeFirstOrThrow();
        const owner = nodes.find((node) => node.workerId === lease.owner);
        assert.ok(owner);
        const others = nodes.filter((node) => node !== owner);
        const killedAt = Date.now();
        await owner.kill();
        await until(
          async () => {
            const s = await status(others[0] ?? owner);
            await sockets();
            return s.connected === true && s.loggedIn === true;
          },
          15_000,
          'reconnected on another node',
        );
        t.diagnostic(`live failover: ${Date.now() - killedAt} ms`);
        await until(async () => (await sockets()) === 1, 10_000, 'one socket open');
        assert.equal(maxSockets, 1, 'never two sockets at once');
        const moved = await db
          .selectFrom('instance_leases')
          .selectAll()
          .where('instance_id', '=', instance.id)
          .executeTakeFirstOrThrow();
        assert.notEqual(moved.owner, owner.workerId);
        assert.ok(Number(moved.token) > Number(lease.token), 'the fencing token grew');
      } finally {
        await Promise.all(nodes.map((node) => node.terminate()));
        await testStore.cleanup();
        await sim.close();
      }
    });
  });
}
