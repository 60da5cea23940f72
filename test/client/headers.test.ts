import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { builtClient, type ClientModule } from '../support/client.ts';
import { testDialects } from '../support/store.ts';
import { errorAnswer, type FetchLike, RECIPIENT, recordingFetch, runningParley } from './support.ts';

/**
 * The headers @parley/client (built as shipped) sends: the client's defaults, its `headers` option, what the call
 * makes (`authorization`, `x-instance-id`, `idempotency-key`, `content-type`), then the call's `headers`, a later
 * layer replacing an earlier one's header of the same name in any case (RFC 9110 section 5.1; docs/client.md
 * "Retries and idempotency"). A header given in another case is never joined with the client's own: a caller's
 * `Idempotency-Key` is the call's key, and an `X-Instance-Id` client header does not break a read's second page.
 */

/** A parley success answer carrying `data`, with `headers`. */
function okAnswer(data: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ success: true, code: 200, data }), {
    status: 200,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/** A `fetch` that records each request's headers (as a Fetch `Headers` reads them) and answers with `answer`. */
function fakeServer(answer: (url: string, index: number) => Response): { fetch: FetchLike; sent: Headers[] } {
  const sent: Headers[] = [];
  return {
    fetch: async (input, init) => {
      sent.push(new Headers(init.headers));
      return answer(input, sent.length - 1);
    },
    sent,
  };
}

describe('@parley/client request headers, names in any case', () => {
  let client: ClientModule;
  before(async () => {
    client = (await builtClient()).module;
  });

  it("a call's Idempotency-Key header, in any case, is its key: sent alone, on retries, on errors", async () => {
    const server = fakeServer((_url, index) =>
      index === 0 ? errorAnswer(503, 'the store is unavailable right now; retry shortly') : okAnswer({}),
    );
    const parley = client.createParleyClient({
      baseUrl: 'http://parley.test',
      apiKey: 'svc_test_x',
      fetch: server.fetch,
      retries: { minDelayMs: 1 },
    });
    await parley.sendText({ phone: RECIPIENT, body: 'hi' }, { headers: { 'Idempotency-Key': 'order-1042' } });
    assert.deepEqual(
      server.sent.map((h) => h.get('idempotency-key')),
      ['order-1042', 'order-1042'],
      'the caller key replaces the generated one on every attempt',
    );

    const refused = fakeServer(() => errorAnswer(422, 'Idempotency-Key reused with a different request'));
    const strict = client.createParleyClient({
      baseUrl: 'http://parley.test',
      apiKey: 'svc_test_x',
      fetch: refused.fetch,
    });
    const error = await strict
      .sendText(
        { phone: RECIPIENT, body: 'hi' },
        { idempotencyKey: 'ignored', headers: { 'IDEMPOTENCY-KEY': 'k-7' } },
      )
      .catch((e: unknown) => e);
    assert.ok(error instanceof client.ParleyError, String(error));
    assert.equal(error.idempotencyKey, 'k-7', 'the error names the key the request carried');
    assert.equal(refused.sent[0]?.get('idempotency-key'), 'k-7');
  });

  it("each layer replaces the one before, in any case: defaults, client's, made, the call's", async () => {
    const server = fakeServer(() => okAnswer({ connected: true }));
    const parley = client.createParleyClient({
      baseUrl: 'http://parley.test',
      apiKey: 'svc_test_x',
      fetch: server.fetch,
      headers: {
        Accept: 'application/vnd.test+json',
        'X-Instance-Id': '5511999990001',
        Authorization: 'Basic x',
      },
    });
    await parley.session.status();
    await parley.session.status({ instance: '5511999990002' });
    await parley.session.status({ instance: '5511999990002', headers: { 'X-INSTANCE-ID': '5511999990003' } });
    assert.deepEqual(
      server.sent.map((h) => [h.get('accept'), h.get('authorization'), h.get('x-instance-id')]),
      [
        ['application/vnd.test+json', 'Bearer svc_test_x', '5511999990001'],
        ['application/vnd.test+json', 'Bearer svc_test_x', '5511999990002'],
        ['application/vnd.test+json', 'Bearer svc_test_x', '5511999990003'],
      ],
    );
  });

  it("the event stream's own Accept and instance replace the client's headers of those names", async () => {
    const instance = '0b6f3c3e-8f2a-4d1e-9c55-2f1d7a9e4b10';
    const server = fakeServer((url) =>
      url.includes('/v1/events/stream')
        ? new Response(
            `event: end\r\ndata: ${JSON.stringify({ error: { code: 401, message: 'invalid API key' } })}\r\n\r\n`,
            {
              status: 200,
              headers: { 'content-type': 'text/event-stream' },
            },
          )
        : okAnswer({ events: [], next: 0 }, { 'x-instance-id': instance }),
    );
    const parley = client.createParleyClient({
      baseUrl: 'http://parley.test',
      apiKey: 'svc_test_x',
      fetch: server.fetch,
      headers: { Accept: 'application/json', 'X-Instance-Id': '5511999990001' },
    });
    await assert.rejects(
      (async () => {
        for await (const _ of parley.events()) assert.fail('no event was sent');
      })(),
      { name: 'ParleyError', status: 401 },
    );
    assert.equal(server.sent.length, 2, 'one page of the backlog, then the stream');
    const [page, stream] = server.sent;
    assert.equal(page?.get('x-instance-id'), '5511999990001');
    assert.equal(stream?.get('accept'), 'text/event-stream');
    assert.equal(stream?.get('x-instance-id'), instance, 'the instance the backlog named, once');
  });
});

for (const dialect of testDialects()) {
  describe(`@parley/client headers against a running parley (${dialect})`, () => {
    const server = runningParley(dialect);

    it("a send keyed by headers { 'Idempotency-Key' } is carried out once across two runs", async () => {
      const text = `order 1042 shipped (${dialect})`;
      const runs = [recordingFetch(), recordingFetch()];
      for (const { fetch } of runs) {
        await server
          .clientWith({ fetch })
          .sendText(
            { phone: RECIPIENT, body: text },
            { headers: { 'Idempotency-Key': `order-1042-${dialect}` } },
          );
      }
      assert.deepEqual(
        runs.map(({ seen }) => [seen.length, seen[0]?.headers['idempotency-key'], seen[0]?.replayed]),
        [
          [1, `order-1042-${dialect}`, null],
          [1, `order-1042-${dialect}`, 'true'],
        ],
      );
      assert.equal(
        await server.stored(text),
        1,
        'the second run was answered from the first, not sent again',
      );
    });

    it("events() with an 'X-Instance-Id' client header reads past its first page, then live", async () => {
      const parley = server.clientWith();
      const { next } = await parley.eventsPage({ limit: 1000 });
      for (const body of ['page one', 'page two']) {
        await parley.post('/v1/sandbox/inbound', { body: { phone: RECIPIENT, body: `${body} ${dialect}` } });
      }
      let opened: () => void = () => undefined;
      const streaming = new Promise<void>((resolve) => {
        opened = resolve;
      });
      const { fetch, seen } = recordingFetch(async (attempt, _index, real) => {
        const response = await real();
        if (attempt.url.includes('/v1/events/stream')) opened();
        return response;
      });
      const named = server.clientWith({
        fetch,
        headers: { 'X-Instance-Id': server.t.instance.id, Accept: 'application/json' },
      });
      const stop = new AbortController();
      const got: string[] = [];
      const loop = (async () => {
        const events = named.events({ after: next, limit: 1, types: ['Message'], signal: stop.signal });
        for await (const event of events) {
          const { message } = event.event as { message?: { conversation?: string } };
          got.push(message?.conversation ?? '');
          if (got.length === 3) stop.abort();
        }
      })();
      await Promise.race([streaming, loop]); // a read that fails ends the loop, and the test, here
      await parley.post('/v1/sandbox/inbound', { body: { phone: RECIPIENT, body: `live ${dialect}` } });
      await loop;
      assert.deepEqual(got, [`page one ${dialect}`, `page two ${dialect}`, `live ${dialect}`]);
      assert.ok(
        seen.every((s) => s.headers['x-instance-id'] === server.t.instance.id),
        `one x-instance-id on every read: ${JSON.stringify(seen.map((s) => s.headers['x-instance-id']))}`,
      );
      assert.equal(seen.at(-1)?.headers.accept, 'text/event-stream');
    });
  });
}
