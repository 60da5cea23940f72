import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { hashApiKey } from '../../src/security/api-keys.ts';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { builtClient, type ClientModule } from '../support/client.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { ENTERPRISE, streamEvents } from '../support/stream-events.ts';
import type { FetchLike } from './support.ts';

/**
 * The stream transport of `client.events()` (docs/client.md "Event log", docs/decisions/0034-client-stream-transport.md),
 * built as shipped, against a listening parley: the backlog in pages, then the events `GET /v1/events/stream` pushes,
 * in order and once each across reconnects, ended by an abort or by the server's `end` event.
 */

const { message, receipt } = streamEvents('3EB0DD');

/** A `fetch` that records the URL of every request. */
function recordingFetch(): { fetch: FetchLike; urls: string[] } {
  const urls: string[] = [];
  return {
    fetch: (input, init) => {
      urls.push(input);
      return fetch(input, init);
    },
    urls,
  };
}

for (const dialect of testDialects()) {
  describe(`@parley/client events() over the event stream (${dialect})`, () => {
    let t: TestApp;
    let baseUrl: string;
    let client: ClientModule;
    let made = 0;

    before(async () => {
      client = (await builtClient()).module;
      t = await createTestApp({ dialect, plan: ENTERPRISE });
      baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => t.close());

    const fresh = () => t.newInstance('test', `client-stream-${++made}`);
    const record = async (instance: Instance, ...events: EngineEvent[]) => {
      for (const event of events) await t.services.recorder.record(instance.id, event);
    };
    /** The log entries of `instance`, as `GET /v1/events` serves them. */
    const logged = async (instance: Instance) => {
      const page = await t.call('GET', `/v1/events?from=${instance.id}&limit=1000`);
      assert.equal(page.status, 200, JSON.stringify(page.body));
      return page.body.data.events as { sequence: number }[];
    };
    /** Iterates `stream` into `got` in the background. */
    const drain = <T>(stream: AsyncIterable<T>, got: T[]) =>
      (async () => {
        for await (const event of stream) got.push(event);
      })();

    it('is the default: the backlog in pages, then live events pushed, in order, once', async () => {
      const instance = await fresh();
      await record(instance, message(1), receipt(1), message(2));
      const { fetch, urls } = recordingFetch();
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, instance: instance.id, fetch });
      const controller = new AbortController();
      const stream = parley.events({ limit: 2, signal: controller.signal });
      const got: { sequence: number }[] = [];
      const loop = drain(stream, got);
      await eventually('the backlog', () => got.length === 3);
      await eventually('the stream opened', () => urls.some((url) => url.includes('/v1/events/stream')));
      await record(instance, message(3), receipt(3));
      await eventually('the live events', () => got.length === 5);
      controller.abort();
      await loop;
      assert.deepEqual(got, await logged(instance));
      assert.equal(stream.cursor, 5);
      assert.deepEqual(
        urls.map((url) => url.slice(baseUrl.length)),
        ['/v1/events?after=0&limit=2', '/v1/events?after=2&limit=2', '/v1/events/stream?after=3'],
        'pages while they come back full, then the stream from the last one',
      );
    });

    it('reconnects after the server drops the stream, resuming after the last event: no duplicate, no gap', async () => {
      const instance = await fresh();
      await record(instance, message(1));
      const { fetch, urls } = recordingFetch();
      const parley = client.createParleyClient({
        baseUrl,
        apiKey: t.key,
        instance: instance.id,
        fetch,
        retries: { minDelayMs: 20 },
      });
      const controller = new AbortController();
      const stream = parley.events({ transport: 'stream', types: ['Message'], signal: controller.signal });
      const got: { sequence: number; type: string }[] = [];
      const loop = drain(stream, got);
      await eventually('the stream opened', () => urls.some((url) => url.includes('/v1/events/stream')));
      await record(instance, message(2));
      await eventually('the first live event', () => got.length === 2);
      for (let round = 1; round <= 2; round++) {
        const opened = urls.length;
        t.app.server.closeAllConnections();
        await record(instance, receipt(10 * round), message(10 * round));
        await eventually(
          `round ${round}: reopened and caught up`,
          () => got.length === 2 + round && urls.length > opened,
        );
      }
      controller.abort();
      await loop;
      const messages = (await logged(instance)).filter((e) => (e as { type?: string }).type === 'Message');
      assert.deepEqual(got, messages);
      assert.deepEqual(
        got.map((e) => e.sequence),
        [1, 2, 4, 6],
      );
      const reopened = urls.filter((url) => url.includes('/v1/events/stream')).slice(1);
      assert.ok(reopened.length >= 2, urls.join('\n'));
      assert.match(reopened[0] ?? '', /after=2&types=Message$/, 'resumed after the last event handed out');
    });

    it('ends quietly on abort while waiting, and a second iterator of the same stream resumes from its cursor', async () => {
      const instance = await fresh();
      await record(instance, message(1));
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, instance: instance.id });
      const controller = new AbortController();
      const stream = parley.events({ signal: controller.signal });
      const got: { sequence: number }[] = [];
      const loop = drain(stream, got);
      await eventually('the backlog', () => got.length === 1);
      controller.abort();
      await loop;
      await record(instance, message(2));
      const next = parley.events({ after: stream.cursor, follow: false });
      const rest: { sequence: number }[] = [];
      await drain(next, rest);
      assert.deepEqual(
        rest.map((e) => e.sequence),
        [2],
      );
    });

    it("throws the server's reason when it ends the stream for good (the key revoked: 401)", async () => {
      const instance = await fresh();
      const key = await t.newKey({ scopes: ['chat:webhook'] });
      const parley = client.createParleyClient({ baseUrl, apiKey: key, instance: instance.id });
      const got: unknown[] = [];
      const loop = drain(parley.events(), got);
      await record(instance, message(1));
      await eventually('the first event', () => got.length === 1);
      const db = t.testStore.store.db;
      const row = await db
        .selectFrom('api_keys')
        .select('id')
        .where('key_hash', '=', hashApiKey(key))
        .executeTakeFirstOrThrow();
      await revokeApiKey(db, row.id);
      await assert.rejects(loop, (error: unknown) => {
        assert.ok(client.isParleyError(error, 401), String(error));
        assert.equal(error.message, 'invalid API key');
        return true;
      });
    });
  });
}

describe('serverSentEvents of @parley/client (the parser of the event stream)', () => {
  let client: ClientModule;
  before(async () => {
    client = (await builtClient()).module;
  });

  /** The events `chunks`, each read as one chunk of the body, parse to. */
  const parse = async (chunks: string[]) => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
        controller.close();
      },
    });
    const events: unknown[] = [];
    for await (const event of client.serverSentEvents(body)) events.push(event);
    return events;
  };

  it('a CR LF split between two chunks is one end of line (WHATWG HTML 9.2.6), wherever the body is cut', async () => {
    const data = JSON.stringify({ error: { code: 401, message: 'invalid API key' } });
    const whole = `event: end\r\ndata: ${data}\r\n\r\n`;
    for (let cut = 0; cut <= whole.length; cut++) {
      assert.deepEqual(
        await parse([whole.slice(0, cut), whole.slice(cut)]),
        [{ event: 'end', data, id: undefined }],
        `cut after ${JSON.stringify(whole.slice(0, cut))}`,
      );
    }
  });

  it('a CR alone ends a line, the last one of the body included (not held for a LF that never comes)', async () => {
    assert.deepEqual(await parse(['id: 7\rdata: a\r\r', 'data: b\r', '\r']), [
      { event: 'message', data: 'a', id: '7' },
      { event: 'message', data: 'b', id: undefined },
    ]);
  });
});
