import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { builtClient, type ClientModule } from '../support/client.ts';
import { eventually } from '../support/eventually.ts';
import { ENTERPRISE, streamEvents } from '../support/stream-events.ts';
import { recordingFetch } from './support.ts';

/**
 * `client.events()` with no instance named, neither in its options nor the client's
 * (docs/decisions/0091-event-reads-name-their-instance.md): it reads the instance parley picks for its first read
 * (the most recently connected, docs/decisions/0002-instance-resolution.md) and keeps to it, sending the
 * `x-instance-id` of that first answer on every later page, poll and reconnect, so another instance becoming the
 * default meanwhile never moves the iteration, and its cursor, to that instance's log. Built as shipped, against a
 * listening parley.
 */

const { message } = streamEvents('3EB0DF');

describe('@parley/client events() without an instance keeps to the one parley named first', () => {
  let t: TestApp;
  let baseUrl: string;
  let client: ClientModule;
  let made = 0;
  /** The last `last_connected_at` given: each {@link becomeDefault} gives a later one. */
  let connectedAt = Date.now() + 60_000;

  before(async () => {
    client = (await builtClient()).module;
    t = await createTestApp({ plan: ENTERPRISE });
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => t.close());

  const fresh = () => t.newInstance('test', `client-pin-${++made}`);
  const record = async (instance: Instance, ...events: EngineEvent[]) => {
    for (const event of events) await t.services.recorder.record(instance.id, event);
  };
  /** Makes `instance` the key's default: the most recently connected of its instances. */
  const becomeDefault = (instance: Instance) => {
    connectedAt += 1000;
    return t.testStore.store.db
      .updateTable('instances')
      .set({ last_connected_at: connectedAt })
      .where('id', '=', instance.id)
      .execute();
  };
  /** Iterates `stream` into `got` as `A#<sequence>` (an event of `a`) or `B#<sequence>` (any other) in the background. */
  const drain = (
    stream: AsyncIterable<{ instanceId: string; sequence: number }>,
    a: Instance,
    got: string[],
  ) =>
    (async () => {
      for await (const event of stream)
        got.push(`${event.instanceId === a.id ? 'A' : 'B'}#${event.sequence}`);
    })();

  for (const transport of ['poll', 'stream'] as const) {
    it(`keeps to the instance of the first answer though its log was empty then [${transport}]`, async () => {
      const a = await fresh();
      const b = await fresh();
      await record(b, message(1), message(2), message(3));
      await becomeDefault(a);
      const { fetch, seen } = recordingFetch();
      const parley = client.createParleyClient({
        baseUrl,
        apiKey: t.key,
        fetch,
        retries: { minDelayMs: 20 },
      });
      const controller = new AbortController();
      const stream = parley.events({ transport, intervalMs: 20, signal: controller.signal });
      const got: string[] = [];
      const loop = drain(stream, a, got);
      // The first answer (poll: the first page; stream: the stream opened after the empty backlog) came from A.
      const path = transport === 'poll' ? '/v1/events?' : '/v1/events/stream?';
      await eventually('the first answer', () => seen.some((s) => s.url.includes(path) && s.status === 200));
      await becomeDefault(b);
      // A reconnect (a server restart, a network blip) resolves the instance again.
      if (transport === 'stream') t.app.server.closeAllConnections();
      await record(a, message(1), message(2));
      await eventually('two events read after B became the default', () => got.length >= 2);
      controller.abort();
      await loop;
      assert.deepEqual(got, ['A#1', 'A#2'], "A's events, none of B's");
      assert.equal(stream.cursor, 2);
      assert.equal(seen[0]?.headers['x-instance-id'], undefined, 'the first read names no instance');
      assert.deepEqual(
        seen.slice(1).map((s) => s.headers['x-instance-id']),
        seen.slice(1).map(() => a.id),
        'every later read names the instance of the first answer',
      );
      if (transport === 'stream') {
        const opened = seen.filter((s) => s.url.includes('/v1/events/stream?'));
        assert.ok(opened.length >= 2, 'the stream was opened again after the cut');
      }
    });

    it(`keeps to its instance when another becomes the default mid-iteration [${transport}]`, async () => {
      const a = await fresh();
      const b = await fresh();
      await becomeDefault(a);
      await record(a, message(1), message(2), message(3));
      await record(b, message(11), message(12), message(13), message(14), message(15), message(16));
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key, retries: { minDelayMs: 20 } });
      const controller = new AbortController();
      const stream = parley.events({ transport, intervalMs: 20, signal: controller.signal });
      const got: string[] = [];
      const loop = drain(stream, a, got);
      await eventually("A's backlog", () => got.length === 3);
      await becomeDefault(b);
      if (transport === 'stream') t.app.server.closeAllConnections();
      await record(a, message(4), message(5));
      await eventually('five events', () => got.length >= 5);
      controller.abort();
      await loop;
      assert.deepEqual(got, ['A#1', 'A#2', 'A#3', 'A#4', 'A#5']);
      assert.equal(stream.cursor, 5);
    });
  }

  it('keeps to the instance of the first entry when the server names none in a header', async () => {
    const a = await fresh();
    const b = await fresh();
    await becomeDefault(a);
    await record(a, message(1));
    await record(b, message(11), message(12), message(13));
    // A parley that does not send `x-instance-id` on its answers.
    const { fetch, seen } = recordingFetch(async (_attempt, _index, real) => {
      const response = await real();
      const headers = new Headers(response.headers);
      headers.delete('x-instance-id');
      return new Response(response.body, { status: response.status, headers });
    });
    const parley = client.createParleyClient({ baseUrl, apiKey: t.key, fetch });
    const controller = new AbortController();
    const stream = parley.events({ transport: 'poll', intervalMs: 20, signal: controller.signal });
    const got: string[] = [];
    const loop = drain(stream, a, got);
    await eventually("A's first event", () => got.length === 1);
    await becomeDefault(b);
    await record(a, message(2));
    await eventually('a second event', () => got.length >= 2);
    controller.abort();
    await loop;
    assert.deepEqual(got, ['A#1', 'A#2']);
    assert.ok(
      seen.slice(1).every((s) => s.headers['x-instance-id'] === a.id),
      'every read after the first names the instance of its first entry',
    );
  });
});
