import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testDialects } from '../support/store.ts';
import { errorAnswer, RECIPIENT, recordingFetch, runningParley } from './support.ts';

/**
 * The retries of @parley/client, built as shipped, against a listening parley on each store dialect
 * (docs/decisions/0032-client-library.md): a send retried after a lost answer, a 409 "in progress" or a dropped
 * connection keeps one Idempotency-Key and sends once (docs/decisions/0010-idempotency.md); GETs wait out 429's
 * Retry-After; retries are bounded.
 */

for (const dialect of testDialects()) {
  describe(`@parley/client retries against a running parley (${dialect})`, () => {
    const server = runningParley(dialect);

    it('a send whose answer was lost (503 from a proxy) is retried with the same Idempotency-Key: one message, the first answer', async () => {
      let first: unknown;
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) => {
        const response = await real();
        if (index > 0) return response;
        first = await response.json(); // parley sent it; the answer never reaches the client
        return errorAnswer(503, 'upstream unavailable', { 'retry-after': '1' });
      });
      const parley = server.clientWith({ fetch, retries: { minDelayMs: 1 } });
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
      assert.equal(await server.stored(text), 1, 'the server saw one message, not two');
    });

    it('a send answered 409 "in progress" (its first attempt still running) is retried with the same key', async () => {
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) =>
        index === 0 ? errorAnswer(409, 'a request with this Idempotency-Key is in progress') : real(),
      );
      const parley = server.clientWith({ fetch, retries: { minDelayMs: 1 } });
      const text = `in progress ${dialect}`;
      assert.equal((await parley.sendText({ phone: RECIPIENT, body: text })).details, 'Sent');
      assert.equal(seen.length, 2);
      assert.equal(seen[1]?.headers['idempotency-key'], seen[0]?.headers['idempotency-key']);
      assert.equal(await server.stored(text), 1);

      // Another 409 is the operation's answer, not a transient one: raised at once.
      const refused = recordingFetch(async () => errorAnswer(409, 'instance is not connected'));
      const strict = server.clientWith({ fetch: refused.fetch });
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
      const parley = server.clientWith({ fetch, retries: { minDelayMs: 1 } });
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
      assert.equal(await server.stored(text), 1);

      // an attempt whose answer does not come within timeoutMs is abandoned and retried the same way
      const slow = recordingFetch(async (_attempt, index, real, init) => {
        const response = await real();
        if (index > 0) return response;
        return new Promise<Response>((_, reject) =>
          init.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }),
        );
      });
      const patient = server.clientWith({ fetch: slow.fetch, timeoutMs: 200, retries: { minDelayMs: 1 } });
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
      assert.equal(await server.stored(late), 1);
    });

    it('a DELETE whose answer was lost, retried into a 404, rejects with ParleyOutcomeUnknownError', async () => {
      const manager = server.clientWith({ apiKey: await server.t.newKey({ scopes: ['instances:manage'] }) });
      const made = await manager.post('/v1/instances', { body: { name: `to delete ${dialect}` } });
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) => {
        const response = await real();
        if (index > 0) return response;
        await response.arrayBuffer(); // parley deleted it; the answer is lost on the way
        throw new TypeError('fetch failed', { cause: new Error('socket hang up') });
      });
      const lossy = server.clientWith({
        fetch,
        apiKey: await server.t.newKey({ scopes: ['instances:manage'] }),
        retries: { minDelayMs: 1 },
      });
      const error = await lossy.delete('/v1/instances/{id}', { path: { id: made.id } }).then(
        () => assert.fail('resolved'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof server.client.ParleyOutcomeUnknownError, String(error));
      assert.ok(
        server.client.isParleyError(error, 404),
        'code that treats a 404 of a DELETE as done keeps working',
      );
      assert.equal(error.name, 'ParleyOutcomeUnknownError');
      assert.equal(error.code, 'not_found');
      assert.equal(error.message, 'instance not found');
      assert.equal(error.method, 'DELETE');
      assert.equal(error.attempts, 2);
      assert.equal(error.unansweredAttempts, 1);
      assert.deepEqual(
        seen.map((s) => [s.method, s.status, s.headers['idempotency-key']]),
        [
          ['DELETE', 200, undefined],
          ['DELETE', 404, undefined],
        ],
      );
      const { instances } = await manager.get('/v1/instances');
      assert.ok(!instances.some((i) => i.id === made.id), 'the lost attempt deleted it');

      // A 404 with every attempt answered is the plain answer: nothing was deleted by this call.
      const again = await manager.delete('/v1/instances/{id}', { path: { id: made.id } }).then(
        () => assert.fail('resolved'),
        (e: unknown) => e,
      );
      assert.ok(server.client.isParleyError(again, 404), String(again));
      assert.ok(!(again instanceof server.client.ParleyOutcomeUnknownError));

      // A DELETE whose lost attempt never reached parley resolves with its retry's answer.
      const kept = await manager.post('/v1/instances', { body: { name: `to delete later ${dialect}` } });
      const refused = recordingFetch(async (_attempt, index, real) => {
        if (index === 0) throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
        return real();
      });
      const retried = server.clientWith({
        fetch: refused.fetch,
        apiKey: await server.t.newKey({ scopes: ['instances:manage'] }),
        retries: { minDelayMs: 1 },
      });
      assert.deepEqual(await retried.delete('/v1/instances/{id}', { path: { id: kept.id } }), {
        details: 'Instance deleted',
        id: kept.id,
      });
    });

    it('a PATCH whose answer was lost is retried and resolves with the state it set', async () => {
      const manager = server.clientWith({ apiKey: await server.t.newKey({ scopes: ['instances:manage'] }) });
      const made = await manager.post('/v1/instances', { body: { name: `to rename ${dialect}` } });
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) => {
        const response = await real();
        if (index > 0) return response;
        await response.arrayBuffer(); // parley renamed it; the answer is lost on the way
        throw new TypeError('fetch failed', { cause: new Error('socket hang up') });
      });
      const lossy = server.clientWith({
        fetch,
        apiKey: await server.t.newKey({ scopes: ['instances:manage'] }),
        retries: { minDelayMs: 1 },
      });
      const renamed = await lossy.patch('/v1/instances/{id}', {
        path: { id: made.id },
        body: { name: `renamed ${dialect}` },
      });
      assert.equal(renamed.id, made.id);
      assert.equal(renamed.name, `renamed ${dialect}`);
      assert.deepEqual(
        seen.map((s) => [s.method, s.status, s.body, s.headers['idempotency-key']]),
        [
          ['PATCH', 200, JSON.stringify({ name: `renamed ${dialect}` }), undefined],
          ['PATCH', 200, JSON.stringify({ name: `renamed ${dialect}` }), undefined],
        ],
      );
      assert.equal(
        (await manager.get('/v1/instances/{id}', { path: { id: made.id } })).name,
        `renamed ${dialect}`,
      );
      await manager.delete('/v1/instances/{id}', { path: { id: made.id } });
    });

    it('GETs are retried on 429 after Retry-After; a Retry-After beyond the limit is raised at once', async () => {
      const { fetch, seen } = recordingFetch(async (_attempt, index, real) =>
        index === 0 ? errorAnswer(429, 'rate limit exceeded', { 'retry-after': '1' }) : real(),
      );
      const parley = server.clientWith({ fetch, retries: { minDelayMs: 1 } });
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
      const patient = server.clientWith({ fetch: locked.fetch });
      const error = await patient.sendText({ phone: RECIPIENT, body: 'x' }).catch((e: unknown) => e);
      assert.ok(error instanceof server.client.ParleyError);
      assert.equal(error.code, 'rate_limited');
      assert.equal(error.retryAfter, 3600);
      assert.equal(locked.seen.length, 1);
    });

    it('retries are bounded: 503 on every attempt gives up after `retries` retries, all with one key', async () => {
      const { fetch, seen } = recordingFetch(async () =>
        errorAnswer(503, 'the store is unavailable right now; retry shortly'),
      );
      const parley = server.clientWith({ fetch, retries: { retries: 2, minDelayMs: 1, maxDelayMs: 5 } });
      const error = await parley.session.connect().catch((e: unknown) => e);
      assert.ok(error instanceof server.client.ParleyError);
      assert.equal(error.status, 503);
      assert.equal(error.code, 'unavailable');
      assert.equal(error.message, 'the store is unavailable right now; retry shortly');
      assert.equal(error.attempts, 3);
      assert.equal(new Set(seen.map((s) => s.headers['idempotency-key'])).size, 1);

      const down = recordingFetch(async () => {
        throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
      });
      const offline = server.clientWith({ fetch: down.fetch, retries: { minDelayMs: 1 } });
      const network = await offline.session.status().catch((e: unknown) => e);
      assert.ok(network instanceof server.client.ParleyNetworkError, String(network));
      assert.equal(network.attempts, 4);
      assert.match(network.message, /ECONNREFUSED/);
    });
  });
}
