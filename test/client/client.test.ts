import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { builtClient, type ClientModule } from '../support/client.ts';
import { testDialects } from '../support/store.ts';

/**
 * @parley/client, built as shipped (test/support/client.ts), against a listening parley on each store dialect with a
 * linked sandbox instance (docs/decisions/0032-client-library.md): typed results, errors as ParleyError, retries
 * that keep one Idempotency-Key (docs/decisions/0010-idempotency.md), the event log iterator
 * (docs/decisions/0030-event-log.md).
 */

type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** One request the client made through {@link recordingFetch}, and what came back. */
interface Seen {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
  status: number | 'network error';
  replayed: string | null;
}

/**
 * A `fetch` that records every attempt and lets `intercept` replace an answer. `intercept(attempt, real)` gets the
 * attempt and a function sending it for real; it returns the answer the client sees, or throws (a network failure).
 */
function recordingFetch(
  intercept?: (
    attempt: Seen,
    index: number,
    real: () => Promise<Response>,
    init: RequestInit,
  ) => Promise<Response>,
): { fetch: FetchLike; seen: Seen[] } {
  const seen: Seen[] = [];
  const fetcher: FetchLike = async (input, init) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const attempt: Seen = {
      method: init.method ?? 'GET',
      url: input,
      headers,
      body: typeof init.body === 'string' ? init.body : undefined,
      status: 'network error',
      replayed: null,
    };
    seen.push(attempt);
    const real = async () => {
      const response = await fetch(input, init);
      attempt.status = response.status;
      attempt.replayed = response.headers.get('idempotent-replayed');
      return response;
    };
    return intercept ? intercept(attempt, seen.length - 1, real, init) : real();
  };
  return { fetch: fetcher, seen };
}

/** A parley error answer as the server writes it. */
function errorAnswer(status: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ error: { code: status, message } }), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
}

const RECIPIENT = '5511988887777';
const UNREGISTERED = '5511977770000';

for (const dialect of testDialects()) {
  describe(`@parley/client against a running parley (${dialect})`, () => {
    let t: TestApp;
    let baseUrl: string;
    let client: ClientModule;

    before(async () => {
      client = (await builtClient()).module;
      // enterprise limits: the manual clock never moves, so a minute window would not reset during the suite
      t = await createTestApp({
        dialect,
        plan: { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 },
      });
      baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
      await loginSandbox(t);
    });
    after(() => t.close());

    /** How many messages of the instance hold `text`. */
    async function stored(text: string): Promise<number> {
      const rows = await t.testStore.store.db
        .selectFrom('messages')
        .select('id')
        .where('instance_id', '=', t.instance.id)
        .where('content', 'like', `%${text}%`)
        .execute();
      return rows.length;
    }

    it('sends a text and reads its typed result; the session and the message read back', async () => {
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, instance: t.instance.id });
      const text = `hello from @parley/client ${dialect}`;
      const sent = await parley.sendText({ phone: RECIPIENT, body: text });
      assert.equal(sent.details, 'Sent');
      assert.match(sent.id, /^[0-9A-F]{16,}$/i);
      assert.ok('timestamp' in sent, 'a synchronous send answers Sent with its timestamp');
      assert.match(sent.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.equal(await stored(text), 1);

      const status = await parley.session.status();
      assert.equal(status.loggedIn, true);
      assert.equal(status.instanceId, t.instance.id);
      const message = await parley.get('/v1/messages/{id}', { path: { id: sent.id } });
      assert.equal(message.id, sent.id);
      assert.equal(message.fromMe, true);

      const queued = await parley.sendText({ phone: RECIPIENT, body: `${text} (queued)` }, { async: true });
      assert.equal(queued.details, 'Queued');
      assert.ok('status' in queued && queued.status === 'pending');

      const png = readFileSync(new URL('../fixtures/media/tiny.png', import.meta.url));
      const image = await parley.sendMedia('image', {
        phone: RECIPIENT,
        image: client.dataUri(png, 'image/png'),
        caption: 'a pixel',
      });
      assert.equal(image.details, 'Sent');

      // a file download resolves with its bytes
      const jpeg = readFileSync(new URL('../fixtures/media/tiny.jpg', import.meta.url));
      const inbound = await parley.post('/v1/sandbox/inbound/media', {
        body: { phone: RECIPIENT, kind: 'image', media: client.dataUri(jpeg, 'image/jpeg') },
      });
      const file = await parley.get('/v1/messages/{id}/media', { path: { id: inbound.id } });
      assert.ok(file instanceof Blob);
      assert.equal(file.type, 'image/jpeg');
      assert.deepEqual(Buffer.from(await file.arrayBuffer()), jpeg);
    });

    it('raises error answers as ParleyError with the exact status, code and message, and retries none of them', async () => {
      const { fetch, seen } = recordingFetch();
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, fetch, retries: { minDelayMs: 1 } });
      const cases: [() => Promise<unknown>, number, string, string][] = [
        [
          () => parley.sendText({ phone: UNREGISTERED, body: 'hi' }),
          422,
          'unprocessable',
          `recipient ${UNREGISTERED} is not registered on the platform`,
        ],
        // a caller without the types (plain JavaScript) can still send a body the server refuses
        [
          () => parley.sendText({ body: 'no recipient' } as unknown as { phone: string; body: string }),
          400,
          'invalid',
          'phone is required',
        ],
        [() => parley.session.qr(), 409, 'conflict', 'already logged in'],
        [
          () => parley.session.status({ instance: '00000000-0000-4000-8000-000000000000' }),
          404,
          'not_found',
          'instance not found',
        ],
        [
          () => client.createParleyClient({ baseUrl, apiKey: 'svc_test_not-a-key', fetch }).session.status(),
          401,
          'unauthenticated',
          'invalid API key',
        ],
        [
          () => parley.eventsPage({ types: ['Message', 'Typing' as 'Message'] }),
          400,
          'invalid',
          'types contains unknown event type Typing (allowed: Message, ReadReceipt, HistorySync, ChatPresence, MessageUpdate, GroupUpdate, Call, PollVote, SessionStatus, MessageStatus)',
        ],
      ];
      for (const [call, status, code, message] of cases) {
        const before = seen.length;
        const error = await call().then(
          () => assert.fail(`expected ${status} ${message}`),
          (e: unknown) => e,
        );
        assert.ok(error instanceof client.ParleyError, String(error));
        assert.equal(error.status, status);
        assert.equal(error.code, code);
        assert.equal(error.message, message);
        assert.equal(error.attempts, 1);
        assert.match(error.requestId ?? '', /^[0-9a-f-]{36}$/);
        assert.ok(client.isParleyError(error, status));
        assert.equal(seen.length - before, 1, `${status} is not retried`);
        if (seen[before]?.method === 'POST')
          assert.equal(error.idempotencyKey, seen[before]?.headers['idempotency-key']);
      }
    });

    it('a send whose answer was lost (503 from a proxy) is retried with the same Idempotency-Key: one message, the first answer', async () => {
      let first: unknown;
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) => {
        const response = await real();
        if (index > 0) return response;
        first = await response.json(); // parley sent it; the answer never reaches the client
        return errorAnswer(503, 'upstream unavailable', { 'retry-after': '1' });
      });
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, fetch, retries: { minDelayMs: 1 } });
      const text = `lost answer ${dialect}`;
      const started = Date.now();
      const sent = await parley.sendText({ phone: RECIPIENT, body: text });
      assert.ok(Date.now() - started >= 1000, 'Retry-After: 1 was waited for');
      assert.equal(seen.length, 2);
      const [one, two] = seen;
      assert.match(one?.headers['idempotency-key'] ?? '', /^[0-9a-f-]{36}$/);
      assert.equal(two?.headers['idempotency-key'], one?.headers['idempotency-key']);
      assert.equal(two?.body, one?.body, 'the retry sends the same bytes');
      assert.equal(two?.replayed, 'true', 'parley answered the retry with the kept answer');
      assert.deepEqual({ success: true, code: 200, data: sent }, first);
      assert.equal(await stored(text), 1, 'the server saw one message, not two');
    });

    it('a send answered 409 "in progress" (its first attempt still running) is retried with the same key', async () => {
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) =>
        index === 0 ? errorAnswer(409, 'a request with this Idempotency-Key is in progress') : real(),
      );
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, fetch, retries: { minDelayMs: 1 } });
      const text = `in progress ${dialect}`;
      assert.equal((await parley.sendText({ phone: RECIPIENT, body: text })).details, 'Sent');
      assert.equal(seen.length, 2);
      assert.equal(seen[1]?.headers['idempotency-key'], seen[0]?.headers['idempotency-key']);
      assert.equal(await stored(text), 1);

      // Another 409 is the operation's answer, not a transient one: raised at once.
      const refused = recordingFetch(async () => errorAnswer(409, 'instance is not connected'));
      const strict = client.createParleyClient({ baseUrl, apiKey: t.key, fetch: refused.fetch });
      await assert.rejects(strict.sendText({ phone: RECIPIENT, body: 'refused' }), {
        name: 'ParleyError',
        status: 409,
        message: 'instance is not connected',
      });
      assert.equal(refused.seen.length, 1);
    });

    it('a send whose connection failed after the request went out is retried with the same key and sends once', async () => {
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) => {
        const response = await real();
        if (index === 0) throw new TypeError('fetch failed', { cause: new Error('socket hang up') });
        return response;
      });
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, fetch, retries: { minDelayMs: 1 } });
      const text = `dropped connection ${dialect}`;
      const sent = await parley.sendText(
        { phone: RECIPIENT, body: text },
        { idempotencyKey: `order-${dialect}-1042` },
      );
      assert.equal(sent.details, 'Sent');
      assert.deepEqual(
        seen.map((s) => s.headers['idempotency-key']),
        [`order-${dialect}-1042`, `order-${dialect}-1042`],
      );
      assert.equal(seen[1]?.replayed, 'true');
      assert.equal(await stored(text), 1);

      // an attempt whose answer does not come within timeoutMs is abandoned and retried the same way
      const slow = recordingFetch(async (_attempt, index, real, init) => {
        const response = await real();
        if (index > 0) return response;
        return new Promise<Response>((_, reject) =>
          init.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }),
        );
      });
      const patient = client.createParleyClient({
        baseUrl,
        apiKey: t.key,
        fetch: slow.fetch,
        timeoutMs: 200,
        retries: { minDelayMs: 1 },
      });
      const late = `slow answer ${dialect}`;
      assert.equal((await patient.sendText({ phone: RECIPIENT, body: late })).details, 'Sent');
      // The abandoned attempt may still run on the server when the retry arrives (a loaded machine): the retry is
      // then answered 409 "in progress" and retried once more, with the same key.
      assert.ok(slow.seen.length >= 2, `${slow.seen.length} attempts`);
      const key = slow.seen[0]?.headers['idempotency-key'];
      assert.ok(key !== undefined);
      assert.deepEqual(
        slow.seen.map((s) => s.headers['idempotency-key']),
        slow.seen.map(() => key),
      );
      assert.equal(await stored(late), 1);
    });

    it('GETs are retried on 429 after Retry-After; a Retry-After beyond the limit is raised at once', async () => {
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) =>
        index === 0 ? errorAnswer(429, 'rate limit exceeded', { 'retry-after': '1' }) : real(),
      );
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, fetch, retries: { minDelayMs: 1 } });
      const started = Date.now();
      const status = await parley.session.status();
      assert.ok(Date.now() - started >= 1000);
      assert.equal(status.loggedIn, true);
      assert.equal(seen.length, 2);
      assert.equal(seen[0]?.headers['idempotency-key'], undefined, 'a GET carries no Idempotency-Key');

      const locked = recordingFetch(async () =>
        errorAnswer(429, 'the platform restricts this account from messaging new contacts', {
          'retry-after': '3600',
        }),
      );
      const patient = client.createParleyClient({ baseUrl, apiKey: t.key, fetch: locked.fetch });
      const error = await patient.sendText({ phone: RECIPIENT, body: 'x' }).catch((e: unknown) => e);
      assert.ok(error instanceof client.ParleyError);
      assert.equal(error.code, 'rate_limited');
      assert.equal(error.retryAfter, 3600);
      assert.equal(locked.seen.length, 1);
    });

    it('retries are bounded: 503 on every attempt gives up after `retries` retries, all with one key', async () => {
      const { fetch, seen } = recordingFetch(async () =>
        errorAnswer(503, 'the store is unavailable right now; retry shortly'),
      );
      const parley = client.createParleyClient({
        baseUrl,
        apiKey: t.key,
        fetch,
        retries: { retries: 2, minDelayMs: 1, maxDelayMs: 5 },
      });
      const error = await parley.session.connect().catch((e: unknown) => e);
      assert.ok(error instanceof client.ParleyError);
      assert.equal(error.status, 503);
      assert.equal(error.code, 'unavailable');
      assert.equal(error.message, 'the store is unavailable right now; retry shortly');
      assert.equal(error.attempts, 3);
      assert.equal(new Set(seen.map((s) => s.headers['idempotency-key'])).size, 1);

      const down = recordingFetch(async () => {
        throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
      });
      const offline = client.createParleyClient({
        baseUrl,
        apiKey: t.key,
        fetch: down.fetch,
        retries: { minDelayMs: 1 },
      });
      const network = await offline.session.status().catch((e: unknown) => e);
      assert.ok(network instanceof client.ParleyNetworkError, String(network));
      assert.equal(network.attempts, 4);
      assert.match(network.message, /ECONNREFUSED/);
    });

    it('events() pages through the backlog in sequence order, then stops when told not to follow', async () => {
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key });
      for (let i = 1; i <= 5; i++) {
        await parley.post('/v1/sandbox/inbound', {
          body: { phone: RECIPIENT, body: `backlog ${i}`, pushName: 'Ana' },
        });
      }
      const all = await parley.eventsPage({ limit: 1000 });
      assert.ok(all.events.length >= 5);
      const { fetch, seen } = recordingFetch();
      const paging = client.createParleyClient({ baseUrl, apiKey: t.key, fetch });
      const stream = paging.events({ follow: false, limit: 2 });
      const read: number[] = [];
      for await (const event of stream) read.push(event.sequence);
      // events recorded meanwhile (the queued send's status) may follow: the backlog read first is a prefix
      assert.deepEqual(
        read.slice(0, all.events.length),
        all.events.map((e) => e.sequence),
      );
      assert.deepEqual(
        read,
        read.map((_, i) => i + 1),
        'every sequence, from 1, in order',
      );
      assert.equal(stream.cursor, read.at(-1));
      assert.equal(seen.length, Math.floor(read.length / 2) + 1, 'pages of 2 until a short one');
      assert.match(seen[1]?.url ?? '', /\/v1\/events\?after=2&limit=2$/);

      const messages: string[] = [];
      const filtered = parley.events({ follow: false, types: ['Message'], after: 0 });
      for await (const event of filtered) {
        assert.equal(event.type, 'Message');
        const body = event.event as { message?: { conversation?: string } };
        if (body.message?.conversation?.startsWith('backlog')) messages.push(body.message.conversation);
      }
      assert.deepEqual(messages, ['backlog 1', 'backlog 2', 'backlog 3', 'backlog 4', 'backlog 5']);
      assert.ok(filtered.cursor >= all.next, 'the cursor steps over the events the filter left out');
    });

    it('events() keeps polling after the backlog, yields new events, and ends quietly on abort', async () => {
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key });
      const { next } = await parley.eventsPage({ limit: 1000 });
      const controller = new AbortController();
      const stream = parley.events({
        after: next,
        types: ['Message'],
        transport: 'poll',
        intervalMs: 20,
        signal: controller.signal,
      });
      const got: string[] = [];
      const loop = (async () => {
        for await (const event of stream) {
          const body = event.event as { message?: { conversation?: string } };
          got.push(`${event.type}:${body.message?.conversation ?? ''}`);
          if (got.length === 1) controller.abort();
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 100)); // a few empty polls first
      await parley.post('/v1/sandbox/inbound', { body: { phone: RECIPIENT, body: 'live one' } });
      await loop;
      assert.deepEqual(got, ['Message:live one']);
      const [live] = (await parley.eventsPage({ after: next, types: ['Message'] })).events;
      assert.equal(stream.cursor, live?.sequence);
    });
  });
}
