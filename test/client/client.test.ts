import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { testDialects } from '../support/store.ts';
import { RECIPIENT, recordingFetch, runningParley, UNREGISTERED } from './support.ts';

/**
 * @parley/client, built as shipped (test/support/client.ts), against a listening parley on each store dialect with a
 * linked sandbox instance (docs/decisions/0032-client-library.md): typed results, errors as ParleyError, the event
 * log iterator (docs/decisions/0030-event-log.md). Its retries are in retries.test.ts.
 */

for (const dialect of testDialects()) {
  describe(`@parley/client against a running parley (${dialect})`, () => {
    const server = runningParley(dialect);

    it('sends a text and reads its typed result; the session and the message read back', async () => {
      const parley = server.clientWith({ instance: server.t.instance.id });
      const text = `hello from @parley/client ${dialect}`;
      const sent = await parley.sendText({ phone: RECIPIENT, body: text });
      assert.equal(sent.details, 'Sent');
      assert.match(sent.id, /^[0-9A-F]{16,}$/i);
      assert.ok('timestamp' in sent, 'a synchronous send answers Sent with its timestamp');
      assert.match(sent.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.equal(await server.stored(text), 1);

      const status = await parley.session.status();
      assert.equal(status.loggedIn, true);
      assert.equal(status.instanceId, server.t.instance.id);
      const message = await parley.get('/v1/messages/{id}', { path: { id: sent.id } });
      assert.equal(message.id, sent.id);
      assert.equal(message.fromMe, true);

      const queued = await parley.sendText({ phone: RECIPIENT, body: `${text} (queued)` }, { async: true });
      assert.equal(queued.details, 'Queued');
      assert.ok('status' in queued && queued.status === 'pending');

      const png = readFileSync(new URL('../fixtures/media/tiny.png', import.meta.url));
      const image = await parley.sendMedia('image', {
        phone: RECIPIENT,
        image: server.client.dataUri(png, 'image/png'),
        caption: 'a pixel',
      });
      assert.equal(image.details, 'Sent');

      // a file download resolves with its bytes
      const jpeg = readFileSync(new URL('../fixtures/media/tiny.jpg', import.meta.url));
      const inbound = await parley.post('/v1/sandbox/inbound/media', {
        body: { phone: RECIPIENT, kind: 'image', media: server.client.dataUri(jpeg, 'image/jpeg') },
      });
      const file = await parley.get('/v1/messages/{id}/media', { path: { id: inbound.id } });
      assert.ok(file instanceof Blob);
      assert.equal(file.type, 'image/jpeg');
      assert.deepEqual(Buffer.from(await file.arrayBuffer()), jpeg);
    });

    it('raises error answers as ParleyError with the exact status, code and message, and retries none of them', async () => {
      const { fetch, seen } = recordingFetch();
      const parley = server.clientWith({ fetch, retries: { minDelayMs: 1 } });
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
          () =>
            server.client
              .createParleyClient({ baseUrl: server.baseUrl, apiKey: 'svc_test_not-a-key', fetch })
              .session.status(),
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
        assert.ok(error instanceof server.client.ParleyError, String(error));
        assert.equal(error.status, status);
        assert.equal(error.code, code);
        assert.equal(error.message, message);
        assert.equal(error.attempts, 1);
        assert.match(error.requestId ?? '', /^[0-9a-f-]{36}$/);
        assert.ok(server.client.isParleyError(error, status));
        assert.equal(seen.length - before, 1, `${status} is not retried`);
        if (seen[before]?.method === 'POST')
          assert.equal(error.idempotencyKey, seen[before]?.headers['idempotency-key']);
      }
    });

    it('events() pages through the backlog in sequence order, then stops when told not to follow', async () => {
      const parley = server.clientWith();
      for (let i = 1; i <= 5; i++) {
        await parley.post('/v1/sandbox/inbound', {
          body: { phone: RECIPIENT, body: `backlog ${i}`, pushName: 'Ana' },
        });
      }
      const all = await parley.eventsPage({ limit: 1000 });
      assert.ok(all.events.length >= 5);
      const { fetch, seen } = recordingFetch();
      const paging = server.clientWith({ fetch });
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
      const parley = server.clientWith();
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
