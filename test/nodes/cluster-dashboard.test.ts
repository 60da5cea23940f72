import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateUser } from '../../src/app/users.ts';
import { sseReader } from '../support/sse.ts';
import { testDialects } from '../support/store.ts';
import { type Child, until } from '../webhooks/child.ts';
import { type Cluster, call, owners, startCluster, stopAll, WAIT_MS } from './support.ts';

/**
 * The dashboard on several nodes (docs/decisions/0022-dashboard.md, docs/decisions/0008-leases-and-fencing.md), end
 * to end: three real parley processes sharing one PostgreSQL schema. A dashboard user signed in through one node
 * connects a new instance, reads its QR code, scans it in the sandbox and watches its events stream, each through a
 * node that does not hold the instance's session: every operation acts on the owner, and the instance's status read
 * through any node says so. The owner authenticates a forwarded request's session itself, and a forged node-to-node
 * call is refused.
 */

const SECRET = 'test-cluster-secret-0123456789abcdef';
const PASSWORD = 'correct horse battery staple';

/** A dashboard session: cookie and CSRF token, usable through any node. */
interface Browser {
  cookie: string;
  csrf: string;
}

async function signIn(node: Child, email: string): Promise<Browser> {
  const response = await fetch(`http://127.0.0.1:${node.port}/dashboard/api/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: PASSWORD }),
  });
  assert.equal(response.status, 200, await response.clone().text());
  const cookie = (response.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const body = (await response.json()) as { data: { csrfToken: string } };
  return { cookie, csrf: body.data.csrfToken };
}

async function dashboard(
  node: Child,
  browser: Browser,
  method: 'GET' | 'POST',
  path: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
) {
  const response = await fetch(`http://127.0.0.1:${node.port}/dashboard/api${path}`, {
    method,
    headers: {
      cookie: browser.cookie,
      ...(method === 'GET' ? {} : { 'x-csrf-token': browser.csrf }),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

/** `promise`, or a failure naming `what` when it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function openEvents(node: Child, browser: Browser, id: string) {
  const response = await fetch(`http://127.0.0.1:${node.port}/dashboard/api/instances/${id}/events`, {
    headers: { cookie: browser.cookie },
  });
  assert.equal(response.status, 200);
  assert.ok(response.body);
  return sseReader(response.body);
}

/**
 * The owner of `cluster.instanceIds[index]`, another node, and a browser signed in on that other node as a new
 * user of the instance's organization with `role`.
 */
async function ownerAndOther(cluster: Cluster, index: number, role: 'member' | 'viewer', label: string) {
  const instanceId = cluster.instanceIds[index] ?? '';
  const ownerId = (await owners(cluster)).get(instanceId);
  const owner = cluster.nodes.find((node) => node.workerId === ownerId);
  const other = cluster.nodes.find((node) => node.workerId !== ownerId);
  assert.ok(owner && other && ownerId);
  const db = cluster.testStore.store.db;
  const row = await db
    .selectFrom('instances')
    .select('org_id')
    .where('id', '=', instanceId)
    .executeTakeFirstOrThrow();
  const email = `${label}-${Date.now()}@example.com`;
  await adminCreateUser(db, { org: row.org_id, email, role, password: PASSWORD });
  return { instanceId, ownerId, owner, other, browser: await signIn(other, email) };
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`three nodes on ${dialect}: the dashboard`, () => {
    let cluster: Cluster;
    before(async () => {
      cluster = await startCluster();
    });
    after(async () => {
      await stopAll(cluster);
      // A node relaying another's events stream answered with that stream only: the route's own handler never
      // ran there too (it would have written a second answer on the same response, and failed).
      for (const node of cluster.nodes)
        assert.doesNotMatch(node.stderr(), /ERR_HTTP_HEADERS_SENT/, node.workerId);
    });

    it('runs an instance operation on the node holding the session, whichever node serves the page', async () => {
      const db = cluster.testStore.store.db;
      const row = await db
        .selectFrom('instances')
        .select('org_id')
        .where('id', '=', cluster.instanceIds[0] ?? '')
        .executeTakeFirstOrThrow();
      const email = `member-${Date.now()}@example.com`;
      await adminCreateUser(db, { org: row.org_id, email, role: 'member', password: PASSWORD });
      const [n1, n2, n3] = cluster.nodes;
      assert.ok(n1 && n2 && n3);
      const browser = await signIn(n1, email);

      const created = await dashboard(n1, browser, 'POST', '/instances', {
        body: { env: 'test', name: 'dash' },
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const id: string = created.body.data.id;
      // The first request addressing the instance places it on a node; the others do not hold its session.
      const first = await call(n1.port, 'GET', `/v1/session/status?from=${id}`, cluster.key);
      assert.equal(first.status, 200);
      const owner = (await owners(cluster)).get(id);
      const others = cluster.nodes.filter((node) => node.workerId !== owner);
      const [via, third] = others;
      assert.ok(owner && via && third && others.length === 2, `placed on ${owner}`);

      // Connect through a node without the session: it runs on the owner; same envelope and request id.
      const connect = await dashboard(via, browser, 'POST', `/instances/${id}/connect`, {
        headers: { 'x-request-id': 'dashboard-forward-1' },
      });
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      assert.equal(connect.headers.get('x-request-id'), 'dashboard-forward-1');
      assert.equal(connect.headers.get('cache-control'), 'no-store');
      assert.equal(connect.body.data.id, id);
      assert.equal(connect.body.data.connected, true);
      assert.equal((await owners(cluster)).get(id), owner, 'the lease did not move');
      // The API, forwarded to the owner from yet another node, sees the connected session.
      const status = await call(third.port, 'GET', `/v1/session/status?from=${id}`, cluster.key);
      assert.equal(status.status, 200);
      assert.equal(status.body.data.connected, true);
      assert.equal(status.body.data.loggedIn, false);

      // The events stream, opened through a node without the session, relays the owner's stream.
      const controller = new AbortController();
      const events = await fetch(`http://127.0.0.1:${third.port}/dashboard/api/instances/${id}/events`, {
        headers: { cookie: browser.cookie, 'x-request-id': 'dashboard-events-1' },
        signal: controller.signal,
      });
      assert.equal(events.status, 200);
      assert.match(events.headers.get('content-type') ?? '', /^text\/event-stream/);
      assert.equal(events.headers.get('x-request-id'), 'dashboard-events-1');
      assert.ok(events.body);
      const stream = sseReader(events.body);
      try {
        const initial = (await stream.next('status')).data;
        assert.equal(initial.connected, true, 'the status comes from the node holding the session');

        // The QR code exists only on the owner: read through another node, it is the owner's.
        let qr: { status: number; body: any } = { status: 0, body: undefined };
        await until(
          async () => {
            qr = await dashboard(via, browser, 'GET', `/instances/${id}/qr`);
            return qr.status === 200;
          },
          WAIT_MS,
          `the QR code through ${via.workerId}`,
        );
        assert.match(qr.body.data.qrCode, /^data:image\/png;base64,/);
        const streamed = (await stream.next('qr', (data) => data !== null)).data;
        assert.ok(typeof streamed.code === 'string' && streamed.code.length > 0);

        // The sandbox scan through a node without the session logs the owner's session in.
        const scan = await dashboard(via, browser, 'POST', `/instances/${id}/sandbox/scan`, {
          body: { phone: '5511977770001' },
        });
        assert.equal(scan.status, 200, JSON.stringify(scan.body));
        assert.equal(scan.body.data.details, 'Scanned: logged in as 5511977770001');
        const loggedIn = (await stream.next('status', (data) => data.loggedIn === true)).data;
        assert.equal(loggedIn.connected, true);
        assert.equal(loggedIn.phone, '5511977770001');
        for (const node of cluster.nodes) {
          const summary = await dashboard(node, browser, 'GET', `/instances/${id}`);
          assert.equal(summary.status, 200);
          assert.equal(summary.body.data.connected, true, `status through ${node.workerId}`);
          assert.equal(summary.body.data.loggedIn, true, `status through ${node.workerId}`);
          const api = await call(node.port, 'GET', `/v1/session/status?from=${id}`, cluster.key);
          assert.equal(api.body.data.connected, true, `API status through ${node.workerId}`);
          assert.equal(api.body.data.loggedIn, true, `API status through ${node.workerId}`);
        }

        // The list, through any node, shows every instance as the node holding its session sees it: all seven,
        // spread over the three nodes, connected and logged in.
        for (const node of cluster.nodes) {
          const list = await dashboard(node, browser, 'GET', '/instances');
          assert.equal(list.status, 200);
          const summaries: { id: string; connected: boolean; loggedIn: boolean }[] = list.body.data.instances;
          assert.deepEqual(
            summaries.map((s) => [s.id, s.connected, s.loggedIn]).sort(),
            [...cluster.instanceIds, id].map((i) => [i, true, true]).sort(),
            `the list through ${node.workerId}`,
          );
        }

        // A sandbox inbound message through another node is recorded by the owner's session.
        const inbound = await dashboard(third, browser, 'POST', `/instances/${id}/sandbox/inbound`, {
          body: { phone: '5511977770002', body: 'hello through a node' },
        });
        assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
        assert.equal(typeof inbound.body.data.id, 'string');

        // Disconnect through a third node: the owner's session closes and the relayed stream says so.
        const disconnect = await dashboard(third, browser, 'POST', `/instances/${id}/disconnect`);
        assert.equal(disconnect.status, 200, JSON.stringify(disconnect.body));
        assert.equal(disconnect.body.data.connected, false);
        const closed = (await stream.next('status', (data) => data.connected === false)).data;
        assert.equal(closed.loggedIn, true);
      } finally {
        controller.abort();
        await stream.cancel().catch(() => undefined);
      }
      assert.equal((await owners(cluster)).get(id), owner, 'the lease stayed with its owner throughout');
    });

    it('lets the owner check the session of a forwarded request, and refuses a forged one', async () => {
      const picked = await ownerAndOther(cluster, 0, 'member', 'forged');
      const { instanceId, ownerId: owner, owner: ownerNode, other, browser } = picked;

      // The wrong cluster secret: refused before anything runs, on the node it reached.
      const forged = await dashboard(other, browser, 'POST', `/instances/${instanceId}/disconnect`, {
        headers: { 'x-parley-forwarded-by': owner ?? '', 'x-parley-cluster-secret': 'not-the-secret' },
      });
      assert.equal(forged.status, 401);
      assert.deepEqual(forged.body, {
        error: { code: 401, message: 'node-to-node call without a valid cluster secret' },
      });
      // The right secret does not stand for a dashboard session: the owner checks cookie and CSRF token itself.
      const cluster1 = { 'x-parley-forwarded-by': other.workerId, 'x-parley-cluster-secret': SECRET };
      const noCookie = await fetch(
        `http://127.0.0.1:${ownerNode.port}/dashboard/api/instances/${instanceId}/disconnect`,
        { method: 'POST', headers: cluster1 },
      );
      assert.equal(noCookie.status, 401);
      assert.deepEqual(await noCookie.json(), { error: { code: 401, message: 'sign in to continue' } });
      const noCsrf = await dashboard(ownerNode, browser, 'POST', `/instances/${instanceId}/disconnect`, {
        headers: { ...cluster1, 'x-csrf-token': 'wrong' },
      });
      assert.equal(noCsrf.status, 403);
      assert.equal(noCsrf.body.error.message, 'missing or invalid CSRF token');
      // A wrong CSRF token is refused where the request arrives, before any forwarding.
      const viaOther = await dashboard(other, browser, 'POST', `/instances/${instanceId}/disconnect`, {
        headers: { 'x-csrf-token': 'wrong' },
      });
      assert.equal(viaOther.status, 403);
      // Nothing ran: the instance is still connected and logged in on its owner.
      const status = await call(other.port, 'GET', `/v1/session/status?from=${instanceId}`, cluster.key);
      assert.equal(status.body.data.connected, true);
      assert.equal(status.body.data.loggedIn, true);
    });

    // Last: it stops two of the three nodes.
    it('ends a relayed events stream when either node stops; reopened, it comes from the new owner', async () => {
      const picked = await ownerAndOther(cluster, 1, 'viewer', 'stream');
      const { instanceId, ownerId, owner: ownerNode, other: relaying, browser } = picked;

      // The owner stops (SIGTERM): it hands the instance over, then ends its streams; the relayed one ends too.
      const first = await openEvents(relaying, browser, instanceId);
      assert.equal((await first.next('status')).data.connected, true);
      const stopping = ownerNode.terminate();
      await within(first.ended(), 20_000, 'the relayed stream ends when the owner stops');
      assert.equal(await within(stopping, 20_000, 'the owner exits'), 0);
      // Reopened through a node without the session, the stream comes from the new owner, which restored it.
      const newOwner = (await owners(cluster)).get(instanceId);
      assert.ok(newOwner && newOwner !== ownerId, `moved to ${newOwner}`);
      const other = cluster.nodes.find((node) => node !== ownerNode && node.workerId !== newOwner);
      assert.ok(other);
      const second = await openEvents(other, browser, instanceId);
      const restored = (await second.next('status', (data) => data.connected === true)).data;
      assert.equal(restored.loggedIn, true);
      // That node stops: the streams it relays end, so it exits instead of waiting for the browser to leave.
      const exiting = other.terminate();
      await within(second.ended(), 20_000, 'the relayed stream ends when the relaying node stops');
      assert.equal(await within(exiting, 20_000, 'the relaying node exits'), 0);
    });
  });
}
