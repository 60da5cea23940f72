import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { STREAM_PAGE_SIZE } from '../../src/app/event-stream.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { Instance } from '../../src/domain/instance.ts';
import type { EngineEvent, MessageSource } from '../../src/domain/messages.ts';
import { NOT_A_STREAM_REQUEST } from '../../src/http/routes/v1/event-stream.ts';
import { hashApiKey } from '../../src/security/api-keys.ts';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { sseReader } from '../support/sse.ts';
import { testDialects } from '../support/store.ts';
import { ENTERPRISE, listenersIdle } from '../support/stream-events.ts';
import { openWs, wsRefusal } from '../support/ws.ts';

/**
 * The event stream, `GET /v1/events/stream` (docs/api.md#event-stream, docs/decisions/0031-event-stream.md): the
 * backlog after a sequence then every event as it is committed, each exactly the event log's entry, over WebSocket
 * and server-sent events, on a real listening server (`app.inject` cannot upgrade or stream).
 */

const PEER = '5511988887777';
const peerJid = `${PEER}@s.whatsapp.net`;
const source: MessageSource = { chat: peerJid, sender: peerJid, isFromMe: false, isGroup: false };
const AT = Date.UTC(2026, 0, 15, 12, 0, 0);

const message = (n: number, text = `message ${n}`): EngineEvent => ({
  type: 'message',
  message: {
    id: `3EB0BB${String(n).padStart(16, '0')}`,
    source,
    pushName: 'Ana',
    timestamp: AT,
    content: { kind: 'text', text },
  },
});
const receipt = (n: number): EngineEvent => ({
  type: 'receipt',
  state: 'read',
  messageIds: [`3EB0BB${String(n).padStart(16, '0')}`],
  source,
  timestamp: AT,
});

for (const dialect of testDialects()) {
  describe(`event stream: GET /v1/events/stream (docs/decisions/0031-event-stream.md) [${dialect}]`, () => {
    let t: TestApp;
    let base: string;
    let ws: string;

    before(async () => {
      t = await createTestApp({ dialect, plan: ENTERPRISE });
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
      ws = base.replace(/^http/, 'ws');
    });
    after(() => t.close());

    const auth = (key = t.key) => ({ authorization: `Bearer ${key}` });
    /** A fresh instance of the org (its sequences start at 1). */
    let made = 0;
    const fresh = () => t.newInstance('test', `stream-${++made}`);
    const record = async (instance: Instance, ...events: EngineEvent[]) => {
      for (const event of events) {
        t.clock.advance(1000);
        await t.services.recorder.record(instance.id, event);
      }
    };
    /** The event log's entries of `instance` after `after`, each as the JSON text the log serves. */
    const logged = async (instance: Instance, after = 0, types?: string) => {
      const query = `from=${instance.id}&after=${after}&limit=1000${types ? `&types=${types}` : ''}`;
      const page = await t.call('GET', `/v1/events?${query}`);
      assert.equal(page.status, 200, JSON.stringify(page.body));
      return (page.body.data.events as unknown[]).map((entry) => JSON.stringify(entry));
    };
    const sse = (path: string, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, { headers: { ...auth(), accept: 'text/event-stream', ...headers } });

    it('WebSocket: the backlog, then live events, each exactly the log entry, in order, once', async () => {
      const instance = await fresh();
      await record(instance, message(1), receipt(1), message(2));
      const client = await openWs(`${ws}/v1/events/stream?from=${instance.id}`, auth());
      try {
        assert.ok(client.headers['x-request-id'], 'the 101 carries the request id');
        assert.ok(client.headers.ratelimit, 'and the rate-limit headers');
        const backlog = [await client.next(), await client.next(), await client.next()];
        assert.deepEqual(backlog, await logged(instance));
        await record(instance, message(3), receipt(3));
        const live = [await client.next(), await client.next()];
        assert.deepEqual(live, await logged(instance, 3));
        assert.deepEqual(
          [...backlog, ...live].map((frame) => JSON.parse(frame).sequence),
          [1, 2, 3, 4, 5],
        );
        await record(instance, message(4));
        assert.equal(JSON.parse(await client.next()).sequence, 6, 'nothing repeated before the next event');
        assert.deepEqual(client.pending(), []);
      } finally {
        client.socket.close();
      }
      await client.closed;
      await eventually('the closed stream unsubscribed', () => listenersIdle(t));
    });

    it('the opening answer names the instance streamed in x-instance-id, the SSE 200 and the WebSocket 101 alike', async () => {
      const instance = await fresh();
      // A key allowed one instance: without `from`, that one is the default (docs/decisions/0002-instance-resolution.md).
      const onlyOne = await t.newKey({ scopes: ['chat:webhook'], instances: [instance.id] });
      const picked = await fetch(`${base}/v1/events/stream`, {
        headers: { ...auth(onlyOne), accept: 'text/event-stream' },
      });
      const named = await sse(`/v1/events/stream?from=${instance.id}`);
      const client = await openWs(`${ws}/v1/events/stream`, auth(onlyOne));
      try {
        assert.equal(picked.status, 200);
        assert.equal(picked.headers.get('x-instance-id'), instance.id, 'SSE, the instance picked by default');
        assert.equal(named.status, 200);
        assert.equal(named.headers.get('x-instance-id'), instance.id, 'SSE, the instance named by from');
        assert.equal(client.headers['x-instance-id'], instance.id, 'the WebSocket 101');
      } finally {
        await picked.body?.cancel();
        await named.body?.cancel();
        client.socket.close();
      }
      await client.closed;
      await eventually('the closed streams unsubscribed', () => listenersIdle(t));
    });

    it('WebSocket: resumes after `after`, and `Last-Event-ID` wins over it, with no duplicate', async () => {
      const instance = await fresh();
      await record(instance, message(1), message(2), message(3), message(4));
      const entries = await logged(instance);
      const fromAfter = await openWs(`${ws}/v1/events/stream?from=${instance.id}&after=2`, auth());
      const fromHeader = await openWs(`${ws}/v1/events/stream?from=${instance.id}&after=1`, {
        ...auth(),
        'last-event-id': '3',
      });
      try {
        assert.deepEqual([await fromAfter.next(), await fromAfter.next()], entries.slice(2));
        assert.deepEqual(await fromHeader.next(), entries[3]);
        await record(instance, message(5));
        const [fifth] = await logged(instance, 4);
        assert.equal(await fromAfter.next(), fifth);
        assert.equal(await fromHeader.next(), fifth);
        assert.deepEqual([...fromAfter.pending(), ...fromHeader.pending()], []);
      } finally {
        fromAfter.socket.close();
        fromHeader.socket.close();
      }
    });

    it('server-sent events: `id`, `event`, `data` per entry; a reconnect with Last-Event-ID resumes exactly', async () => {
      const instance = await fresh();
      await record(instance, message(1), receipt(1));
      const first = await sse(`/v1/events/stream?from=${instance.id}`);
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('content-type'), 'text/event-stream; charset=utf-8');
      assert.ok(first.headers.get('x-request-id'));
      assert.ok(first.body);
      const stream = sseReader(first.body);
      const entries = await logged(instance);
      const got = [await stream.next(), await stream.next()];
      assert.deepEqual(
        got.map((e) => [e.id, e.event, e.text]),
        [
          ['1', 'Message', entries[0]],
          ['2', 'ReadReceipt', entries[1]],
        ],
      );
      await record(instance, message(2));
      const third = await stream.next();
      assert.deepEqual([third.id, third.event, third.text], ['3', 'Message', (await logged(instance, 2))[0]]);
      await stream.cancel();

      // EventSource reconnects with the URL it had (after=0) and the id of the last event it got.
      await record(instance, message(3));
      const again = await sse(`/v1/events/stream?from=${instance.id}&after=0`, { 'last-event-id': '3' });
      assert.ok(again.body);
      const resumed = sseReader(again.body);
      const fourth = await resumed.next();
      assert.deepEqual([fourth.id, fourth.text], ['4', (await logged(instance, 3))[0]]);
      await resumed.cancel();
    });

    it('`types` keeps only the named types, in the backlog and live', async () => {
      const instance = await fresh();
      await record(instance, message(1), receipt(1), message(2));
      const client = await openWs(`${ws}/v1/events/stream?from=${instance.id}&types=ReadReceipt`, auth());
      const stream = await sse(`/v1/events/stream?from=${instance.id}&types=ReadReceipt,Call`);
      assert.ok(stream.body);
      const reader = sseReader(stream.body);
      try {
        const receipts = await logged(instance, 0, 'ReadReceipt');
        assert.equal(await client.next(), receipts[0]);
        assert.equal((await reader.next()).text, receipts[0]);
        await record(instance, message(3), receipt(3));
        const later = await logged(instance, 3, 'ReadReceipt');
        assert.equal(await client.next(), later[0]);
        assert.equal(JSON.parse(later[0] ?? '{}').sequence, 5);
        const event = await reader.next();
        assert.deepEqual([event.id, event.event, event.text], ['5', 'ReadReceipt', later[0]]);
        assert.deepEqual(client.pending(), []);
      } finally {
        client.socket.close();
        await reader.cancel();
      }
    });

    it('400 for a request that is neither a WebSocket upgrade nor asks for server-sent events', async () => {
      const plain = await fetch(`${base}/v1/events/stream?from=${t.instance.id}`, { headers: auth() });
      assert.equal(plain.status, 400);
      assert.deepEqual(await plain.json(), { error: { code: 400, message: NOT_A_STREAM_REQUEST } });
      const json = await fetch(`${base}/v1/events/stream`, {
        headers: { ...auth(), accept: 'application/json' },
      });
      assert.equal(json.status, 400);
    });

    it('400 naming the field for a bad `after`, `types` or `Last-Event-ID`, before any upgrade', async () => {
      const url = `${ws}/v1/events/stream?from=${t.instance.id}`;
      assert.deepEqual(await wsRefusal(`${url}&after=-1`, auth()), {
        status: 400,
        body: {
          error: {
            code: 400,
            message: 'after must be an integer from 0 to 9007199254740991 (a sequence number)',
          },
        },
      });
      const unknown = await wsRefusal(`${url}&types=Message,Typing`, auth());
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.error.message, /^types contains unknown event type Typing \(allowed: /);
      const lastId = await sse(`/v1/events/stream?from=${t.instance.id}`, { 'last-event-id': 'seven' });
      assert.deepEqual(await lastId.json(), {
        error: {
          code: 400,
          message: 'Last-Event-ID must be an integer from 0 to 9007199254740991 (a sequence number)',
        },
      });
    });

    it('409 for a position past the last event, naming `after` or `Last-Event-ID`, before any upgrade', async () => {
      const instance = await fresh();
      await record(instance, message(1), receipt(1));
      const ahead = (field: string, after: number) => ({
        error: {
          code: 409,
          message: `${field} ${after} is past the instance's last event (sequence 2): resume from 2 or less, or from 0 for the oldest event kept`,
        },
      });
      const url = `${ws}/v1/events/stream?from=${instance.id}`;
      assert.deepEqual(await wsRefusal(`${url}&after=3`, auth()), { status: 409, body: ahead('after', 3) });
      const header = await sse(`/v1/events/stream?from=${instance.id}&after=1`, { 'last-event-id': '7' });
      assert.equal(header.status, 409);
      assert.deepEqual(await header.json(), ahead('Last-Event-ID', 7));
      // The last sequence itself is the position of a consumer that is up to date: the stream opens there.
      const client = await openWs(`${url}&after=2`, auth());
      try {
        await record(instance, message(2));
        assert.equal(JSON.parse(await client.next()).sequence, 3);
      } finally {
        client.socket.close();
      }
      await client.closed;
    });

    it('401 without a valid key, 403 without chat:webhook, 404 for another organization’s instance', async () => {
      const url = `${ws}/v1/events/stream?from=${t.instance.id}`;
      const invalid = { error: { code: 401, message: 'invalid API key' } };
      assert.deepEqual(await wsRefusal(url, {}), { status: 401, body: invalid });
      assert.deepEqual(await wsRefusal(url, { authorization: 'Bearer svc_test_nope' }), {
        status: 401,
        body: invalid,
      });
      const noAuth = await fetch(`${base}/v1/events/stream`, { headers: { accept: 'text/event-stream' } });
      assert.equal(noAuth.status, 401);
      const scoped = await t.newKey({ scopes: ['chat:messages'] });
      const forbidden = { error: { code: 403, message: 'API key lacks required scope chat:webhook' } };
      assert.deepEqual(await wsRefusal(url, auth(scoped)), { status: 403, body: forbidden });
      assert.deepEqual(await (await sse(`/v1/events/stream`, auth(scoped))).json(), forbidden);
      const other = await t.newKey({ org: (await otherOrg(t)).id });
      const notFound = { error: { code: 404, message: 'instance not found' } };
      assert.deepEqual(await wsRefusal(url, auth(other)), { status: 404, body: notFound });
      const foreign = await sse(`/v1/events/stream?from=${t.instance.id}`, auth(other));
      assert.equal(foreign.status, 404);
      assert.deepEqual(await foreign.json(), notFound);
    });

    it('opening a stream is one request of the plan: past the minute window, 429 with Retry-After', async () => {
      const org = await adminCreateOrg(t.testStore.store.db, {
        name: `limited-${made}-${dialect}`,
        plan: 'enterprise',
        perMinute: 1,
        perDay: 1000,
      });
      const instance = await adminCreateInstance(t.testStore.store.db, { org: org.id, env: 'test' });
      const key = await t.newKey({ org: org.id });
      const url = `${ws}/v1/events/stream?from=${instance.id}`;
      const first = await openWs(url, auth(key));
      try {
        await record(instance, message(1));
        assert.equal(
          JSON.parse(await first.next()).sequence,
          1,
          'the events a stream carries are not counted',
        );
        await record(instance, message(2));
        assert.equal(JSON.parse(await first.next()).sequence, 2);
        const limited = await wsRefusal(url, auth(key));
        assert.equal(limited.status, 429);
        assert.equal(limited.body.error.message, 'rate limit exceeded');
        assert.ok(limited.body.error.retryAfter >= 1);
      } finally {
        first.socket.close();
      }
    });

    it('ends when the key is revoked (4401 / `end` 401) or the instance removed (4404 / `end` 404)', async () => {
      const instance = await fresh();
      const key = await t.newKey();
      const client = await openWs(`${ws}/v1/events/stream?from=${instance.id}`, auth(key));
      const response = await sse(`/v1/events/stream?from=${instance.id}`, auth(key));
      assert.ok(response.body);
      const reader = sseReader(response.body);
      const db = t.testStore.store.db;
      const row = await db
        .selectFrom('api_keys')
        .select('id')
        .where('key_hash', '=', hashApiKey(key))
        .executeTakeFirstOrThrow();
      await revokeApiKey(db, row.id);
      assert.deepEqual(await client.closed, { code: 4401, reason: 'invalid API key' });
      const end = await reader.next('end');
      assert.deepEqual(end.data, { error: { code: 401, message: 'invalid API key' } });
      await reader.ended();

      const removed = await fresh();
      const second = await openWs(`${ws}/v1/events/stream?from=${removed.id}`, auth());
      const secondSse = await sse(`/v1/events/stream?from=${removed.id}`);
      assert.ok(secondSse.body);
      const secondReader = sseReader(secondSse.body);
      await db.deleteFrom('instances').where('id', '=', removed.id).execute();
      assert.deepEqual(await second.closed, { code: 4404, reason: 'instance not found' });
      assert.deepEqual((await secondReader.next('end')).data, {
        error: { code: 404, message: 'instance not found' },
      });
    });

    it('a stream past its first events ends 4404 / `end` 404 when DELETE /v1/instances/{id} removes the instance', async () => {
      // The delete takes the instance's webhook_state row with it: its last sequence reads 0, below the streams'
      // positions. That read must end the streams as the removed instance they are, not as a 1011 / 500.
      const instance = await fresh();
      await record(instance, message(1), receipt(1));
      const client = await openWs(`${ws}/v1/events/stream?from=${instance.id}`, auth());
      const response = await sse(`/v1/events/stream?from=${instance.id}`);
      assert.ok(response.body);
      const reader = sseReader(response.body);
      assert.equal(JSON.parse(await client.next()).sequence, 1);
      assert.equal(JSON.parse(await client.next()).sequence, 2);
      assert.equal((await reader.next()).id, '1');
      assert.equal((await reader.next()).id, '2');
      const manage = await t.newKey({ scopes: ['instances:manage'] });
      const deleted = await t.call('DELETE', `/v1/instances/${instance.id}`, undefined, auth(manage));
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
      // A commit's wake-up (the logout of a connected instance records its SessionStatus) makes the streams read at
      // once, before their periodic recheck would find the instance gone.
      t.services.commits.afterCommit(instance.id, message(3));
      assert.deepEqual(await client.closed, { code: 4404, reason: 'instance not found' });
      assert.deepEqual((await reader.next('end')).data, {
        error: { code: 404, message: 'instance not found' },
      });
      await reader.ended();
    });

    it('ends 4409 / `end` 409 naming the last sequence when the log falls below the position of a live instance', async () => {
      // A store restored from an older backup, or failed over to a replica behind the primary, while streams were
      // open: the instance is there, its last sequence is below what the streams read. Reading on would skip the
      // events handed out again under those sequences; the stream says so, as opening it at that position would.
      const instance = await fresh();
      await record(instance, message(1), receipt(1));
      const client = await openWs(`${ws}/v1/events/stream?from=${instance.id}&after=1`, auth());
      const response = await sse(`/v1/events/stream?from=${instance.id}&after=1`);
      assert.ok(response.body);
      const reader = sseReader(response.body);
      assert.equal(JSON.parse(await client.next()).sequence, 2);
      assert.equal((await reader.next()).id, '2');
      const db = t.testStore.store.db;
      await db
        .deleteFrom('webhook_events')
        .where('instance_id', '=', instance.id)
        .where('sequence', '=', 2)
        .execute();
      await db
        .updateTable('webhook_state')
        .set({ last_sequence: 1 })
        .where('instance_id', '=', instance.id)
        .execute();
      t.services.commits.afterCommit(instance.id, message(3));
      const message409 =
        "position 2 is past the instance's last event (sequence 1): resume from 1 or less, or from 0 for the oldest event kept";
      assert.deepEqual(await client.closed, { code: 4409, reason: message409 });
      assert.deepEqual((await reader.next('end')).data, { error: { code: 409, message: message409 } });
      await reader.ended();
    });

    if (dialect === 'sqlite') {
      // The transport's behaviour does not depend on the store: checked once.
      it('a consumer that reads nothing holds one page on the server, and gets everything once it reads', async () => {
        const instance = await fresh();
        const count = 400;
        const text = 'x'.repeat(40_000);
        await Promise.all(
          Array.from({ length: count }, (_, i) => t.services.recorder.record(instance.id, message(i, text))),
        );
        const client = await openWs(`${ws}/v1/events/stream?from=${instance.id}`, auth());
        // Stop reading from the connection: the kernel's buffers fill, then the server's socket.
        const raw = (client.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket;
        raw.pause();
        const server = () => [...t.app.websocketServer.clients][0];
        const pageBytes = STREAM_PAGE_SIZE * (text.length + 1000);
        const buffered = await eventually('the server buffers for the paused client', () => {
          const amount = server()?.bufferedAmount ?? 0;
          return amount > 0 ? amount : undefined;
        });
        assert.ok(buffered <= pageBytes, `${buffered} bytes buffered: at most one page of ${pageBytes}`);
        // While stalled, the buffer never grows past one page (a stream without backpressure would queue all 16 MB).
        for (let i = 0; i < 10; i++) {
          await new Promise((resolve) => setImmediate(resolve));
          assert.ok((server()?.bufferedAmount ?? 0) <= pageBytes);
        }
        raw.resume();
        const sequences: number[] = [];
        for (let i = 0; i < count; i++) sequences.push(JSON.parse(await client.next()).sequence);
        assert.deepEqual(
          sequences,
          Array.from({ length: count }, (_, i) => i + 1),
        );
        client.socket.close();
      });
    }
  });
}

/** Another organization. */
function otherOrg(t: TestApp) {
  return adminCreateOrg(t.testStore.store.db, {
    name: `other-${Math.random().toString(36).slice(2, 8)}`,
    plan: 'free',
  });
}
