import assert from 'node:assert/strict';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { FORWARD_ID_HEADER } from '../../src/http/plugins/forward.ts';
import { appFor, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * A forward whose connection closes before the owner answers (docs/decisions/0008-leases-and-fencing.md): the owner
 * died with the request sent, or the connection broke. Two nodes in this process share one store; the owner is
 * reached through a TCP proxy that can close the connection once the request went through (the owner did the work
 * and its answer is lost) or before (the owner never read it). A send, whose job follows from the forward id, is
 * forwarded again and done once; another POST answers 503, since it may have run, and under an `Idempotency-Key`
 * that 503 decides nothing (docs/decisions/0010-idempotency.md): the key keeps its request, and a retry forwards
 * under the same id.
 */

const SECRET = 'forward-repeat-cluster-secret-0123456789';

/**
 * What the proxy does with the next request: pass it, or close its connection before or after the owner read it, or
 * let the owner answer and hand the forwarder a malformed answer instead (an error other than a closed connection,
 * after the owner did the work, as a hung owner's timeout is).
 */
type Mode = 'pass' | 'close-after-request' | 'close-before-request' | 'garble-after-request';

/**
 * A TCP proxy in front of `port`; `next` applies to the next request only (its first bytes, on whichever
 * connection the forwarder uses), later ones pass. `forwardIds` lists the forward id of each request it saw, in order.
 */
async function startProxy(port: number): Promise<{
  url: string;
  next: (mode: Mode) => void;
  forwardIds: string[];
  close: () => Promise<void>;
}> {
  let mode: Mode = 'pass';
  const forwardIds: string[] = [];
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };
  const server: Server = createServer((client) => {
    track(client);
    const upstream = tcpConnect(port, '127.0.0.1');
    track(upstream);
    let dropAnswer = false;
    let garbleAnswer = false;
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', (chunk: Buffer) => {
      const forwardId = new RegExp(`^${FORWARD_ID_HEADER}: *([^\\r\\n]+)`, 'im').exec(
        chunk.toString('latin1'),
      );
      if (forwardId?.[1] !== undefined) forwardIds.push(forwardId[1]);
      const own = mode;
      mode = 'pass';
      if (own === 'close-before-request') return end();
      if (own === 'close-after-request') dropAnswer = true;
      if (own === 'garble-after-request') garbleAnswer = true;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      // The owner answered, so it did the work: the answer is dropped and the forwarder's connection closed.
      if (dropAnswer) return end();
      if (garbleAnswer) {
        garbleAnswer = false;
        client.write('not an HTTP answer\r\n\r\n');
        return;
      }
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}`,
    next: (m) => {
      mode = m;
    },
    forwardIds,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Listens on a free loopback port and joins the cluster under `url` (default: its own address). */
async function join(t: TestApp, url?: (port: number) => Promise<string>): Promise<void> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  assert.ok(address && typeof address === 'object');
  assert.ok(t.services.cluster);
  await t.services.cluster.keeper.start(url ? await url(address.port) : `http://127.0.0.1:${address.port}`);
}

for (const dialect of testDialects()) {
  describe(`a forward whose connection closes before the answer [${dialect}]`, () => {
    let shared: TestStore;
    let owner: TestApp;
    let receiving: TestApp;
    let proxy: Awaited<ReturnType<typeof startProxy>>;
    before(async () => {
      shared = await createTestStore(dialect);
      owner = await appFor(dialect, {
        testStore: shared,
        env: { CLUSTER_SECRET: SECRET, NODE_ID: 'node-a' },
      });
      receiving = await appFor(dialect, {
        testStore: shared,
        env: { CLUSTER_SECRET: SECRET, NODE_ID: 'node-b' },
      });
      await join(owner, async (port) => {
        proxy = await startProxy(port);
        return proxy.url;
      });
      await join(receiving);
      await loginSandbox(owner);
      assert.ok(owner.services.cluster && receiving.services.cluster);
      assert.equal((await owner.services.cluster.keeper.route(owner.instance)).local, true);
      assert.equal((await receiving.services.cluster.keeper.route(owner.instance)).local, false);
    });
    after(async () => {
      await receiving?.close();
      await owner?.close();
      await proxy?.close();
      await shared?.cleanup();
    });

    const post = (url: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
      receiving.app.inject({
        method: 'POST',
        url,
        payload: JSON.stringify({ from: owner.instance.id, ...body }),
        headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/json', ...headers },
      });
    /** Ids of the messages the instance sent, oldest first. */
    const sentIds = async () =>
      (
        await shared.store.db
          .selectFrom('messages')
          .select(['id', 'timestamp'])
          .where('instance_id', '=', owner.instance.id)
          .where('from_me', '=', 1)
          .execute()
      ).map((row) => row.id);
    const jobs = (ids: string[]) =>
      shared.store.db
        .selectFrom('send_jobs')
        .select(['id', 'status'])
        .where('instance_id', '=', owner.instance.id)
        .where('id', 'in', ids)
        .execute();

    /** Sends `text` through the receiving node with the proxy in `mode`; asserts 200 and one new message. */
    const sendOnceThrough = async (mode: Mode, text: string) => {
      const before = await sentIds();
      proxy.next(mode);
      const response = await post('/v1/messages/send', { phone: PEER, body: text });
      assert.equal(response.statusCode, 200, response.body);
      const { id } = JSON.parse(response.body).data as { id: string };
      assert.deepEqual(
        (await sentIds()).filter((sentId) => !before.includes(sentId)),
        [id],
        'relayed and stored once',
      );
      return id;
    };

    it('a send whose answer was lost is forwarded again and answered for the one job the owner stored', async () => {
      const id = await sendOnceThrough('close-after-request', 'answer lost once');
      assert.deepEqual(await jobs([id]), [{ id, status: 'sent' }]);
    });

    it('a queued send whose answer was lost is accepted once', async () => {
      const jobIds = async () =>
        (
          await shared.store.db
            .selectFrom('send_jobs')
            .select('id')
            .where('instance_id', '=', owner.instance.id)
            .execute()
        ).map((row) => row.id);
      const before = await jobIds();
      proxy.next('close-after-request');
      const response = await post(
        '/v1/messages/send',
        { phone: PEER, body: 'queued, answer lost once' },
        { prefer: 'respond-async' },
      );
      assert.equal(response.statusCode, 202, response.body);
      const { id } = JSON.parse(response.body).data as { id: string };
      assert.deepEqual(
        (await jobIds()).filter((jobId) => !before.includes(jobId)),
        [id],
        'one job',
      );
    });

    it('a send the owner never read is forwarded again and sent once', async () => {
      await sendOnceThrough('close-before-request', 'never read once');
    });

    it('another POST whose answer was lost answers 503: it may have run', async () => {
      const first = await post('/v1/messages/send', { phone: PEER, body: 'to react to' });
      assert.equal(first.statusCode, 200, first.body);
      const { id } = JSON.parse(first.body).data as { id: string };
      proxy.next('close-after-request');
      const reacted = await post('/v1/messages/react', { phone: PEER, id: `me:${id}`, body: '👍' });
      assert.equal(reacted.statusCode, 503, reacted.body);
      assert.deepEqual(JSON.parse(reacted.body), {
        error: { code: 503, message: 'the node serving this instance did not answer' },
      });
    });

    it('an Idempotency-Key POST whose answer was lost keeps its request: the retry forwards under the same id', async () => {
      const first = await post('/v1/messages/send', { phone: PEER, body: 'to react to, keyed' });
      assert.equal(first.statusCode, 200, first.body);
      const { id } = JSON.parse(first.body).data as { id: string };
      const react = () =>
        post(
          '/v1/messages/react',
          { phone: PEER, id: `me:${id}`, body: '👍' },
          { 'idempotency-key': 'lost-1' },
        );
      const seen = proxy.forwardIds.length;
      proxy.next('close-after-request');
      const lost = await react();
      assert.equal(lost.statusCode, 503, lost.body);
      // The owner may have reacted: the 503 decides nothing, so the key stays with its request, ended unfinished.
      const rows = await shared.store.db
        .selectFrom('idempotency_keys')
        .select(['request_id', 'locked_until', 'status'])
        .where('key', '=', 'lost-1')
        .execute();
      assert.equal(rows.length, 1, 'the key is not forgotten');
      assert.deepEqual(
        rows.map((row) => [Number(row.locked_until), row.status]),
        [[0, null]],
      );
      const again = await react();
      assert.equal(again.statusCode, 200, again.body);
      const ids = proxy.forwardIds.slice(seen);
      assert.equal(ids.length, 2, 'one forward each');
      assert.equal(ids[1], ids[0], 'the retry continues the request the lost forward ran under');
      assert.equal(ids[0], rows[0]?.request_id);
    });

    it('an Idempotency-Key send whose forward failed after the owner ran it is continued, not sent again', async () => {
      const before = await sentIds();
      const send = () =>
        post(
          '/v1/messages/send',
          { phone: PEER, body: 'keyed, answer garbled once' },
          { 'idempotency-key': 'garbled-1' },
        );
      const seen = proxy.forwardIds.length;
      proxy.next('garble-after-request');
      const failed = await send();
      assert.equal(failed.statusCode, 503, failed.body);
      // The owner sent the message: the 503 decides nothing, so the key keeps its request, ended unfinished.
      const rows = await shared.store.db
        .selectFrom('idempotency_keys')
        .select(['request_id', 'locked_until', 'status'])
        .where('key', '=', 'garbled-1')
        .execute();
      assert.deepEqual(
        rows.map((row) => [Number(row.locked_until), row.status]),
        [[0, null]],
        'the key is not forgotten',
      );
      const again = await send();
      assert.equal(again.statusCode, 200, again.body);
      const { id } = JSON.parse(again.body).data as { id: string };
      assert.deepEqual(
        (await sentIds()).filter((sentId) => !before.includes(sentId)),
        [id],
        'sent once',
      );
      const ids = proxy.forwardIds.slice(seen);
      assert.equal(ids.length, 2, 'one forward each');
      assert.equal(ids[1], ids[0], 'the retry continues the request the failed forward ran under');
    });

    it('a GET whose answer was lost is asked again', async () => {
      proxy.next('close-after-request');
      const status = await receiving.app.inject({
        method: 'GET',
        url: `/v1/session/status?from=${owner.instance.id}`,
        headers: { authorization: `Bearer ${owner.key}` },
      });
      assert.equal(status.statusCode, 200, status.body);
      assert.equal(JSON.parse(status.body).data.loggedIn, true);
    });
  });
}
