import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort } from '../support/ports.ts';
import { testDialects } from '../support/store.ts';
import { type Child, until } from '../webhooks/child.ts';
import {
  assertDelivered,
  type Cluster,
  failedRequests,
  GRACEFUL_LEASES,
  startCluster,
  startTraffic,
  stopAll,
  WAIT_MS,
} from './support.ts';

/**
 * Three nodes behind HAProxy (the deployment docs/deploy.md describes): HAProxy checks `/readyz`, the client only
 * talks to HAProxy, one node is stopped with SIGTERM under traffic, and no request fails. Defined where HAProxy is
 * installed (scripts/test.js reports this part as not run otherwise); cluster-term.test.ts runs it after its own test,
 * in the same file so the clusters never start at the same time.
 */

const HAPROXY = process.env.HAPROXY_PATH ?? '/usr/sbin/haproxy';

/** The HAProxy configuration of docs/deploy.md, with the test's ports and faster health checks. */
function config(port: number, nodes: readonly Child[]): string {
  return [
    'global',
    '  maxconn 512',
    'defaults',
    '  mode http',
    '  timeout connect 1s',
    '  timeout client 30s',
    '  timeout server 30s',
    // A loaded machine can take seconds to answer /readyz under the suite's parallel load: a check is not failed for that.
    '  timeout check 5s',
    '  retries 3',
    '  option redispatch',
    '  retry-on conn-failure',
    'frontend parley',
    `  bind 127.0.0.1:${port}`,
    '  default_backend nodes',
    'backend nodes',
    '  balance roundrobin',
    '  option http-server-close',
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    '  default-server inter 500ms fall 2 rise 2',
    ...nodes.map((node) => `  server ${node.workerId} 127.0.0.1:${node.port} check`),
    '',
  ].join('\n');
}

/** Defines the HAProxy suite when HAProxy is installed. */
export function haproxySuite(): void {
  if (!existsSync(HAPROXY)) return;
  for (const dialect of testDialects().filter((d) => d === 'postgres')) {
    describe(`three nodes behind HAProxy on ${dialect}`, () => {
      let cluster: Cluster | undefined;
      let proxy: ChildProcess | undefined;
      const dir = mkdtempSync(join(tmpdir(), 'parley-haproxy-'));
      after(async () => {
        proxy?.kill('SIGKILL');
        if (cluster) await stopAll(cluster);
        rmSync(dir, { recursive: true, force: true });
      });

      it('a node stopped with SIGTERM under traffic through HAProxy fails no request', async () => {
        cluster = await startCluster(GRACEFUL_LEASES);
        const port = await freePort();
        const file = join(dir, 'haproxy.cfg');
        writeFileSync(file, config(port, cluster.nodes));
        proxy = spawn(HAPROXY, ['-db', '-f', file], { stdio: 'ignore' });
        const front = { port, workerId: 'haproxy' };
        await until(
          async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200,
          WAIT_MS,
          'HAProxy answers',
        );
        const traffic = await startTraffic(cluster, { atLeast: 24, through: [front] });
        const { outcomes } = traffic;
        const leaving = cluster.nodes[2];
        assert.ok(leaving);
        assert.equal(await leaving.terminate(), 0);
        await traffic.more(24, 'traffic after the hand-over');
        await traffic.stop();
        assert.deepEqual(
          outcomes.filter((o) => o.status !== 200),
          [],
          failedRequests(cluster, outcomes),
        );
        await assertDelivered(
          cluster,
          outcomes.flatMap((o) => (o.id ? [o.id] : [])),
        );
      });
    });
  }
}
