import assert from 'node:assert/strict';
import type { InjectOptions } from 'fastify';
import { appFor } from '../messages/support.ts';
import type { TestApp } from '../support/app.ts';
import { createTestStore, type TestDialect, type TestStore } from '../support/store.ts';

/** A raw POST with `key` as bearer and the JSON text `payload` sent byte for byte. */
export async function post(
  t: TestApp,
  url: string,
  payload: string,
  headers: Record<string, string> = {},
  key = t.key,
) {
  const options: InjectOptions = {
    method: 'POST',
    url,
    payload,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
  };
  return t.app.inject(options);
}

/** Messages the instance sent (rows of the messages table). */
export async function sentRows(t: TestApp, instanceId = t.instance.id): Promise<string[]> {
  const rows = await t.services.store.db
    .selectFrom('messages')
    .select('id')
    .where('instance_id', '=', instanceId)
    .where('from_me', '=', 1)
    .execute();
  return rows.map((row) => row.id);
}

/** Starts listening on a free loopback port and joins the cluster with that URL (an app started as a node). */
export async function joinCluster(t: TestApp): Promise<void> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  assert.ok(address && typeof address === 'object');
  assert.ok(t.services.cluster);
  await t.services.cluster.keeper.start(`http://127.0.0.1:${address.port}`);
}

/**
 * Two nodes, `node-a` and `node-b`, on one new test store with the cluster secret `secret`, each listening and
 * joined to the cluster. The caller closes both apps, then cleans the store up.
 */
export async function twoNodes(
  dialect: TestDialect,
  secret: string,
): Promise<{ shared: TestStore; a: TestApp; b: TestApp }> {
  const shared = await createTestStore(dialect);
  const a = await appFor(dialect, { testStore: shared, env: { CLUSTER_SECRET: secret, NODE_ID: 'node-a' } });
  const b = await appFor(dialect, { testStore: shared, env: { CLUSTER_SECRET: secret, NODE_ID: 'node-b' } });
  await joinCluster(a);
  await joinCluster(b);
  return { shared, a, b };
}
