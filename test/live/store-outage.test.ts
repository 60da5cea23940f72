/**
 * A PostgreSQL outage under live inbound traffic (docs/decisions/0011-store-faults.md, docs/deploy.md "What a
 * database restart does"): parley runs as a child process on a database of its own, one live instance (the real
 * Baileys engine) linked to a simulator account receives a steady stream of messages from a simulated user, and
 * the test terminates parley's backends and refuses new connections for {@link OUTAGE_MS}, then allows them again.
 * The process stays up, requests needing the store answer 503 with Retry-After, /readyz is 503 during and 200
 * after, and every message the user sent is stored once and delivered to a real HTTPS receiver under one
 * webhook-id. PostgreSQL only (TEST_DATABASE_URL).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Simulator } from '../../sim/simulator.ts';
import { STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import { call } from '../nodes/support.ts';
import { type Receiver, startReceiver, webhookIdsByMessage } from '../support/https-receiver.ts';
import { createOutageDatabase, type OutageDatabase } from '../support/outage-database.ts';
import { testDialects } from '../support/store.ts';
import { type Child, childEnv, configure, newSecretKey, seed, startChild } from '../webhooks/child.ts';
import { control, simCaFile, startTestSimulator, until } from './support.ts';

/** How long the database refuses connections, ms (at least 30 s: a PostgreSQL restart or failover). */
const OUTAGE_MS = 30_000;
/** The simulated user writing to the instance, and the account the instance is linked to. */
const PEER = '5511988880005';
const ACCOUNT = '5511920000099';
/** One message from the user every this many ms. */
const STREAM_EVERY_MS = 250;
/**
 * How long the link before the outage may take, ms: setup, not what is tested; a login on a loaded machine took over
 * the default 20 s (as test/nodes/live-cluster.ts allows 90 s for its links).
 */
const LINK_WAIT_MS = 90_000;

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`a PostgreSQL outage under live inbound traffic (${dialect})`, () => {
    let database: OutageDatabase | undefined;
    let sim: Simulator | undefined;
    let receiver: Receiver | undefined;
    let node: Child | undefined;
    after(async () => {
      await node?.terminate();
      await receiver?.close();
      await sim?.close();
      await database?.drop();
    });

    it('the process stays up, answers 503 with Retry-After, and loses no message sent during the outage', async (t) => {
      database = await createOutageDatabase();
      sim = await startTestSimulator();
      receiver = await startReceiver();
      const { testStore } = database;
      node = await startChild(
        {
          ...childEnv(testStore, newSecretKey()),
          PLATFORM_URL: sim.url,
          PLATFORM_ROOT_KEY: sim.rootKey.toString('hex'),
          PLATFORM_CA_FILE: simCaFile(sim),
          CHILD_LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
        },
        'outage-node',
      );
      const { instances, key } = await seed(testStore, 1, { unlimited: true, env: 'live' });
      const instanceId = instances[0]?.id ?? '';
      const from = `?from=${instanceId}`;
      const currentSim = sim;
      const currentNode = node;
      const get = (path: string) => call(currentNode.port, 'GET', path, key);

      assert.equal((await control(sim, 'POST', '/users', { phone: PEER, pushName: 'Peer' })).status, 201);
      assert.equal((await control(sim, 'POST', '/users', { phone: ACCOUNT, pushName: 'Shop' })).status, 201);
      await configure(node, key, instanceId, receiver.url);
      const qr = await get(`/v1/session/qr${from}`);
      assert.equal(qr.status, 200, JSON.stringify(qr.body));
      const scan = await control(sim, 'POST', '/scan', { code: qr.body.data.code, phone: ACCOUNT });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      await until(
        'the instance linked',
        async () => {
          const status = (await get(`/v1/session/status${from}`)).body.data;
          return status?.connected === true && status.loggedIn === true ? true : undefined;
        },
        LINK_WAIT_MS,
      );

      // The user writes one message every STREAM_EVERY_MS through the simulator, all along.
      const written: { id: string; at: number }[] = [];
      let streaming = true;
      const stream = (async () => {
        for (let i = 1; streaming; i++) {
          const response = await control(currentSim, 'POST', '/messages', {
            from: PEER,
            to: ACCOUNT,
            text: `outage ${i}`,
          });
          assert.equal(response.status, 201, JSON.stringify(response.body));
          written.push({ id: String(response.body.id), at: Date.now() });
          await sleep(STREAM_EVERY_MS);
        }
      })();
      const storedIds = async () =>
        new Set(
          (
            await testStore.store.db
              .selectFrom('messages')
              .select('id')
              .where('instance_id', '=', instanceId)
              .execute()
          ).map((row) => row.id),
        );
      await until('the first messages stored', async () =>
        (await storedIds()).size >= 4 ? true : undefined,
      );

      // The outage: new connections refused, every backend of parley's database terminated.
      const terminated = await database.takeDown();
      const downAt = Date.now();
      t.diagnostic(`backends terminated: ${terminated}`);
      const during = await until('a 503 for a request that needs the store', async () => {
        const answer = await get(`/v1/session/status${from}`);
        return answer.status === 503 ? answer : undefined;
      });
      assert.deepEqual(during.body, { error: { code: 503, message: STORE_UNAVAILABLE } });
      assert.equal(during.headers.get('retry-after'), '5');
      const notReady = await get('/readyz');
      assert.equal(notReady.status, 503);
      assert.equal(notReady.headers.get('retry-after'), '5');
      assert.deepEqual(notReady.body, { error: { code: 503, message: 'store is not ready' } });
      // Hold the outage, checking the process answers (503s) throughout.
      let checks = 0;
      while (Date.now() - downAt < OUTAGE_MS) {
        assert.ok(currentNode.alive(), `parley exited during the outage: ${currentNode.stderr()}`);
        const answer = await get(`/v1/messages/none${from}`);
        assert.equal(answer.status, 503, JSON.stringify(answer.body));
        assert.equal((await get('/readyz')).status, 503);
        checks += 1;
        await sleep(1_000);
      }
      const duringOutage = written.filter((w) => w.at >= downAt).length;
      t.diagnostic(`messages written during the ${OUTAGE_MS} ms outage: ${duringOutage}; ${checks} checks`);
      const metrics = await fetch(`http://127.0.0.1:${currentNode.port}/metrics`).then((r) => r.text());
      const backlog = metrics.match(/^parley_inbound_backlog (\d+)/m)?.[1];
      t.diagnostic(`parley_inbound_backlog at the end of the outage: ${backlog}`);

      await database.bringBack();
      const backAt = Date.now();
      await until('/readyz 200 again', async () =>
        (await get('/readyz')).status === 200 ? true : undefined,
      );
      const readyMs = Date.now() - backAt;
      await until('a request that needs the store answered again', async () =>
        (await get(`/v1/session/status${from}`)).status === 200 ? true : undefined,
      );
      const servingMs = Date.now() - backAt;
      t.diagnostic(`after the database returned: ready in ${readyMs} ms, serving in ${servingMs} ms`);
      assert.ok(currentNode.alive());

      // A few more messages after the recovery, then the stream stops.
      const countAtRecovery = written.length;
      await until('messages after the recovery', () =>
        written.length >= countAtRecovery + 4 ? true : undefined,
      );
      streaming = false;
      await stream;

      // Every message the user wrote is stored exactly once (primary key) and delivered under one webhook-id.
      const ids = written.map((w) => w.id);
      await until('every written message stored', async () => {
        const stored = await storedIds();
        return ids.every((id) => stored.has(id)) ? true : undefined;
      }).catch(async (error: unknown) => {
        const stored = await storedIds();
        throw new Error(
          `${(error as Error).message}; missing ${JSON.stringify(ids.filter((id) => !stored.has(id)))}; ${currentNode.stderr()}`,
        );
      });
      const webhookIds = () => webhookIdsByMessage(receiver?.requests ?? []);
      await until('every written message delivered', () => {
        const delivered = webhookIds();
        return ids.every((id) => delivered.has(id)) ? true : undefined;
      });
      const delivered = webhookIds();
      for (const id of ids) assert.equal(delivered.get(id)?.size, 1, `${id}: one webhook-id`);
      t.diagnostic(`messages written: ${ids.length}, stored and delivered: ${ids.length}`);
      assert.ok(currentNode.alive(), 'parley is still running');
    });
  });
}
