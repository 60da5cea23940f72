import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { sseReader } from '../support/sse.ts';
import { testDialects } from '../support/store.ts';
import { ENTERPRISE, streamEvents } from '../support/stream-events.ts';
import { openWs, wsRefusal } from '../support/ws.ts';

/**
 * The event log and the event stream keep to the key's environment and allow-list
 * (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0002-instance-resolution.md): a test key never reads a live
 * instance's events, nor a live key a test instance's, however the instance is named (`from`, `x-instance-id`) and
 * even when the other environment's instance connected last; a key allowed some instances reads no other. Each refusal
 * is the same 404 an unknown instance gets.
 */

const { message } = streamEvents('3EB0E7');
const notFound = { error: { code: 404, message: 'instance not found' } };

for (const dialect of testDialects()) {
  describe(`event log and stream across environments and allow-lists [${dialect}]`, () => {
    let t: TestApp;
    let base: string;
    let live: Instance;
    let liveKey: string;

    before(async () => {
      t = await createTestApp({ dialect, plan: ENTERPRISE });
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
      live = await t.newInstance('live', 'live-1');
      liveKey = await t.newKey({ env: 'live' });
      await t.services.recorder.record(live.id, message(1));
      await t.services.recorder.record(t.instance.id, message(2));
      // The live instance connected last: the default of a request that names no instance, for a live key only.
      await t.testStore.store.db
        .updateTable('instances')
        .set({ last_connected_at: Date.now() })
        .where('id', '=', live.id)
        .execute();
    });
    after(() => t.close());

    const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
    /** The status and body of `GET /v1/events` with `key` and `headers`, and the instance its page names. */
    const page = async (key: string, query: string, headers: Record<string, string> = {}) => {
      const answer = await t.call('GET', `/v1/events?${query}`, undefined, { ...bearer(key), ...headers });
      return { status: answer.status, body: answer.body, instance: answer.headers['x-instance-id'] };
    };
    /** The status and body of an SSE opening of the stream. */
    const sse = async (key: string, query: string, headers: Record<string, string> = {}) => {
      const answer = await fetch(`${base}/v1/events/stream?${query}`, {
        headers: { ...bearer(key), accept: 'text/event-stream', ...headers },
      });
      if (answer.status === 200) {
        assert.ok(answer.body);
        const reader = sseReader(answer.body);
        const first = await reader.next();
        await reader.cancel();
        return { status: 200, body: first.data, instance: answer.headers.get('x-instance-id') };
      }
      return {
        status: answer.status,
        body: await answer.json(),
        instance: answer.headers.get('x-instance-id'),
      };
    };
    const ws = (query: string) => `${base.replace(/^http/, 'ws')}/v1/events/stream?${query}`;

    it('a test key reads no live instance, named by from or x-instance-id, in the log or either form of the stream', async () => {
      assert.deepEqual(await page(t.key, `from=${live.id}`), {
        status: 404,
        body: notFound,
        instance: undefined,
      });
      assert.deepEqual(await page(t.key, '', { 'x-instance-id': live.id }), {
        status: 404,
        body: notFound,
        instance: undefined,
      });
      assert.deepEqual(await sse(t.key, `from=${live.id}`), { status: 404, body: notFound, instance: null });
      assert.deepEqual(await sse(t.key, '', { 'x-instance-id': live.id }), {
        status: 404,
        body: notFound,
        instance: null,
      });
      assert.deepEqual(await wsRefusal(ws(`from=${live.id}`), bearer(t.key)), {
        status: 404,
        body: notFound,
      });
      assert.deepEqual(await wsRefusal(ws(''), { ...bearer(t.key), 'x-instance-id': live.id }), {
        status: 404,
        body: notFound,
      });
    });

    it('a live key reads no test instance; each key’s default is its own environment’s instance', async () => {
      assert.deepEqual(await page(liveKey, `from=${t.instance.id}`), {
        status: 404,
        body: notFound,
        instance: undefined,
      });
      assert.deepEqual(await sse(liveKey, `from=${t.instance.id}`), {
        status: 404,
        body: notFound,
        instance: null,
      });
      assert.deepEqual(await wsRefusal(ws(`from=${t.instance.id}`), bearer(liveKey)), {
        status: 404,
        body: notFound,
      });
      // Without `from`: the test key's default is the test instance, though the live one connected last.
      const testPage = await page(t.key, `from=${t.instance.id}`);
      assert.equal(testPage.status, 200);
      const testDefault = await page(t.key, '');
      assert.equal(testDefault.instance, t.instance.id);
      assert.deepEqual(testDefault.body, testPage.body);
      const livePage = await page(liveKey, '');
      assert.equal(livePage.instance, live.id);
      assert.deepEqual(
        livePage.body.data.events.map((entry: { instanceId: string; sequence: number }) => [
          entry.instanceId,
          entry.sequence,
        ]),
        [[live.id, 1]],
      );
      const testStream = await sse(t.key, '');
      assert.equal(testStream.instance, t.instance.id);
      assert.equal(testStream.body.instanceId, t.instance.id);
      const client = await openWs(ws(''), bearer(liveKey));
      try {
        assert.equal(client.headers['x-instance-id'], live.id);
        assert.equal(JSON.parse(await client.next()).instanceId, live.id);
      } finally {
        client.socket.close();
      }
      await client.closed;
    });

    it('a key allowed one instance reads no other instance of its environment', async () => {
      const other = await t.newInstance('test', 'other');
      await t.services.recorder.record(other.id, message(3));
      const onlyOther = await t.newKey({ instances: [other.id] });
      assert.deepEqual(await page(onlyOther, `from=${t.instance.id}`), {
        status: 404,
        body: notFound,
        instance: undefined,
      });
      assert.deepEqual(await sse(onlyOther, `from=${t.instance.id}`), {
        status: 404,
        body: notFound,
        instance: null,
      });
      assert.deepEqual(await wsRefusal(ws(`from=${t.instance.id}`), bearer(onlyOther)), {
        status: 404,
        body: notFound,
      });
      const own = await sse(onlyOther, '');
      assert.equal(own.instance, other.id);
      assert.equal(own.body.instanceId, other.id);
    });
  });
}
