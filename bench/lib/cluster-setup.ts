import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { migrateToLatest, openStore, type Store } from '../../src/store/database.ts';
import type { Database } from '../../src/store/schema.ts';
import { pollUntil } from './cluster-probe.ts';
import { type ClusterNodeProcess, hostNamePrefix, startNode } from './nodes.ts';
import { createBenchOrg } from './org.ts';

/**
 * Setup of the cluster benchmark (bench/scenarios/cluster.ts): a fresh schema on PostgreSQL, an org, a key, three
 * `parley serve` nodes sharing it (bench/lib/nodes.ts) and sandbox instances logged in through them.
 */

const CA_FILE = fileURLToPath(new URL('../../test/fixtures/tls/cert.pem', import.meta.url));

/** What {@link startCluster} needs. */
export interface ClusterSetupSettings {
  /** PostgreSQL server; a schema of its own is made there and dropped by the cleanup. */
  databaseUrl: string;
  /** Redis the nodes share (rate limits, invalidations). */
  redisUrl: string;
  /** Sandbox instances to create. */
  instances: number;
  /** HMAC key of the instances' webhooks. */
  hmacKey: string;
  /** Webhook URL of every instance (the benchmark receiver). */
  webhookUrl: string;
}

/** A running three-node cluster. */
export interface Cluster {
  /** The shared store (a pool of 3 connections on the cluster's schema). */
  db: Kysely<Database>;
  /** The `svc_test_` API key of the org. */
  key: string;
  /** The three nodes, started in this order: n1, n2, n3. */
  nodes: [ClusterNodeProcess, ClusterNodeProcess, ClusterNodeProcess];
  /** The sandbox instances, logged in, in creation order. */
  instanceIds: string[];
  /** How the nodes are named: 'one host name' or 'a host name each'. */
  hosts: string;
  /** Stops the nodes (SIGTERM, SIGKILL after 10 s), closes the store, drops the schema, deletes the data folder. */
  cleanup(): Promise<void>;
}

/** `url` with `?options=-c search_path=<schema>` added: the nodes' DATABASE_URL. */
function withSchema(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  return parsed.toString();
}

/** `POST base+path` with the key and a JSON body; a non-JSON answer gives an empty body with its status. */
export async function api(
  base: string,
  key: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: { data?: { id?: string } } }> {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: { data?: { id?: string } } = {};
  try {
    parsed = JSON.parse(text) as { data?: { id?: string } };
  } catch {
    // A non-JSON answer keeps its status.
  }
  return { status: response.status, body: parsed };
}

/**
 * Starts the cluster: a fresh schema `bench_<hex>` on `databaseUrl` migrated, an enterprise org with limits no run
 * reaches and one `svc_test_` key (before the first node boots, so no node runs the first-boot bootstrap), then
 * nodes n1, n2, n3 one after the other with `CLUSTER_SECRET` set, a host name each where `unshare --uts` works,
 * and once all three have published their URLs, `instances` sandbox instances each set up through a different
 * node (connect, HMAC key, webhook, scan), so the leases spread them evenly. `log` gets a line on the host names.
 * @throws when the store, a node or a setup request fails, or the nodes do not publish their URLs within 30 s
 *   (everything started is cleaned up first).
 */
export async function startCluster(
  settings: ClusterSetupSettings,
  log: (line: string) => void,
): Promise<Cluster> {
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-bench-cluster-'));
  const nodes: ClusterNodeProcess[] = [];
  let store: Store | undefined;
  const cleanup = async () => {
    await Promise.all(nodes.map((node) => node.terminate(10_000)));
    await store?.destroy();
    const client = new pg.Client({ connectionString: settings.databaseUrl });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await client.end();
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    store = await openStore({ dialect: 'postgres', url: settings.databaseUrl }, { schema, poolSize: 3 });
    await migrateToLatest(store);
    const db = store.db;
    // The org exists before the first node boots, so no node runs the first-boot bootstrap.
    const { orgId, key } = await createBenchOrg(db, 'bench-cluster', 'test');
    const env = {
      DATABASE_URL: withSchema(settings.databaseUrl, schema),
      REDIS_URL: settings.redisUrl,
      SECRET_KEY: randomBytes(32).toString('hex'),
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      CLUSTER_SECRET: randomBytes(24).toString('hex'),
      // The load generator stops using a node before it stops it, as a balancer would after its checks.
      DRAIN_GRACE_SECONDS: '0',
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
      OUTBOUND_CA_FILE: CA_FILE,
    };
    // Own host names where possible, so a killed node is found dead as on separate machines (bench/lib/nodes.ts).
    const unshare = hostNamePrefix();
    const hosts = unshare === undefined ? 'one host name' : 'a host name each';
    log(`  nodes: ${hosts}${unshare === undefined ? ' (unshare --uts is not available here)' : ''}`);
    // One after the other: three processes compiling at once starve a two-core machine.
    for (const id of ['n1', 'n2', 'n3']) nodes.push(await startNode(id, env, unshare));
    const published = await pollUntil(async () => {
      const rows = await db.selectFrom('nodes').select('url').where('url', 'is not', null).execute();
      return rows.length >= nodes.length;
    }, 30_000);
    if (!published) throw new Error('the three nodes did not publish their URLs within 30 s');

    // Instances, each set up through a different node (the first request places it on the least-loaded node).
    const instanceIds: string[] = [];
    for (let i = 0; i < settings.instances; i++) {
      const instance = await adminCreateInstance(db, { org: orgId, env: 'test', name: `bench-${i}` });
      const node = nodes[i % nodes.length];
      if (!node) throw new Error('no node');
      const from = `?from=${instance.id}`;
      const steps: [string, unknown][] = [
        [`/v1/session/connect${from}`, {}],
        [`/v1/session/hmac/config${from}`, { hmacKey: settings.hmacKey }],
        [`/v1/webhook${from}`, { webhookUrl: settings.webhookUrl }],
        [`/v1/sandbox/scan${from}`, { phone: `55119${String(i).padStart(8, '0')}` }],
      ];
      for (const [path, body] of steps) {
        const answer = await api(node.url, key, path, body);
        if (answer.status !== 200)
          throw new Error(`${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
      }
      instanceIds.push(instance.id);
    }
    const [n1, n2, n3] = nodes;
    if (!n1 || !n2 || !n3) throw new Error('three nodes expected');
    return { db, key, nodes: [n1, n2, n3], instanceIds, hosts, cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}
