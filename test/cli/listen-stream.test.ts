import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { serverSentEvents } from '../../packages/client/src/sse.ts';
import type { CliIo } from '../../src/cli/commands/context.ts';
import { CliError } from '../../src/cli/errors.ts';
import { listenStream } from '../../src/cli/listen-stream.ts';
import type { Instance } from '../../src/domain/instance.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { hashApiKey } from '../../src/security/api-keys.ts';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { ENTERPRISE, streamEvents } from '../support/stream-events.ts';
import { cliLines as cli } from './support.ts';

/**
 * `parley listen` reading the event stream (docs/cli.md "listen", docs/decisions/0033-listen-reads-the-stream.md)
 * against a listening parley: any key with chat:webhook (test or live), the output format, `--after`, `--types`,
 * `--max-events`, the API's refusals as exit 1, and reconnects that resume after the last event printed.
 */

const { message, receipt } = streamEvents('3EB0CC');

/** Captures what {@link listenStream} prints. */
function capture(): { io: CliIo; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (text) => out.push(text), err: (text) => err.push(text), env: {} }, out, err };
}

describe('parley listen: the event stream, with any key', () => {
  let t: TestApp;
  let base: string;
  let made = 0;

  before(async () => {
    t = await createTestApp({ plan: ENTERPRISE });
    base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => t.close());

  const fresh = (env: 'test' | 'live' = 'test') => t.newInstance(env, `listen-${++made}`);
  const record = async (instance: Instance, ...events: EngineEvent[]) => {
    for (const event of events) await t.services.recorder.record(instance.id, event);
  };
  /** The log entries of `instance` after `after`, as the API serves them. */
  const logged = async (instance: Instance, after = 0, key = t.key) => {
    const page = await t.call('GET', `/v1/events?from=${instance.id}&after=${after}&limit=1000`, undefined, {
      authorization: `Bearer ${key}`,
    });
    assert.equal(page.status, 200, JSON.stringify(page.body));
    return page.body.data.events as { type: string; sequence: number; instanceId: string }[];
  };

  it('prints the backlog as JSON lines ({"payload": entry}) and exits 0 after --max-events', async () => {
    const instance = await fresh();
    await record(instance, message(1), receipt(1), message(2));
    const run = await cli(
      {},
      'listen',
      '--url',
      base,
      '--key',
      t.key,
      '--from',
      instance.id,
      '--max-events',
      '3',
      '--json',
    );
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /Ready: waiting for events/);
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines,
      (await logged(instance)).map((entry) => ({ payload: entry })),
    );
  });

  it('keeps the human format: time, type, #sequence, then the entry; --after and --types filter', async () => {
    const instance = await fresh();
    await record(instance, message(1), receipt(1), message(2), message(3));
    const run = await cli(
      {},
      'listen',
      '--url',
      base,
      '--key',
      t.key,
      '--from',
      instance.id,
      '--after',
      '1',
      '--types',
      'Message',
      '--max-events',
      '2',
    );
    assert.equal(run.code, 0, run.stderr);
    const entries = (await logged(instance)).filter((e) => e.type === 'Message' && e.sequence > 1);
    const lines = run.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 4, run.stdout);
    entries.forEach((entry, i) => {
      assert.match(
        lines[2 * i] ?? '',
        new RegExp(`^\\d{2}:\\d{2}:\\d{2}  Message #${entry.sequence}  event stream$`),
      );
      assert.deepEqual(JSON.parse((lines[2 * i + 1] ?? '').trim()), entry);
    });
    assert.deepEqual(
      entries.map((e) => e.sequence),
      [3, 4],
    );
  });

  it('takes a live key on a live instance of the org, and leaves its webhook alone', async () => {
    const instance = await fresh('live');
    const liveKey = await t.newKey({ env: 'live', scopes: ['chat:webhook'] });
    await record(instance, message(1), receipt(1));
    const run = await cli(
      {},
      'listen',
      '--url',
      base,
      '--key',
      liveKey,
      '--from',
      instance.id,
      '--max-events',
      '2',
      '--json',
    );
    assert.equal(run.code, 0, run.stderr);
    const printed = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line).payload);
    assert.deepEqual(printed, await logged(instance, 0, liveKey));
    assert.ok(printed.every((entry: { instanceId: string }) => entry.instanceId === instance.id));
    const webhook = await t.call('GET', `/v1/webhook?from=${instance.id}`, undefined, {
      authorization: `Bearer ${liveKey}`,
    });
    assert.equal(webhook.body.data.webhook, '', 'listen set no webhook');
  });

  it("exits 1 with the API's message: a key without chat:webhook (403), an unknown instance (404), a bad type (400)", async () => {
    const instance = await fresh();
    const noScope = await t.newKey({ scopes: ['chat:messages'] });
    const forbidden = await cli({}, 'listen', '--url', base, '--key', noScope, '--from', instance.id);
    assert.equal(forbidden.code, 1);
    assert.equal(
      forbidden.stderr.trim(),
      'parley: GET /v1/events/stream answered 403: API key lacks required scope chat:webhook',
    );
    const missing = await cli(
      {},
      'listen',
      '--url',
      base,
      '--key',
      t.key,
      '--from',
      '00000000-0000-4000-8000-000000000000',
    );
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr.trim(), 'parley: GET /v1/events/stream answered 404: instance not found');
    const badType = await cli(
      {},
      'listen',
      '--url',
      base,
      '--key',
      t.key,
      '--from',
      instance.id,
      '--types',
      'Nope',
    );
    assert.equal(badType.code, 1);
    assert.match(
      badType.stderr,
      /^parley: GET \/v1\/events\/stream answered 400: types contains unknown event type Nope/,
    );
    const unreachable = await cli({}, 'listen', '--url', 'http://127.0.0.1:1', '--key', t.key);
    assert.equal(unreachable.code, 1);
    assert.match(
      unreachable.stderr,
      /^parley: cannot reach parley at http:\/\/127\.0\.0\.1:1 \(.*\); is it running\?/,
    );
  });

  it('keeps --webhook to test keys, and each mode refuses the flags of the other', async () => {
    const liveKey = await t.newKey({ env: 'live', scopes: ['chat:webhook'] });
    const live = await cli({}, 'listen', '--webhook', '--url', base, '--key', liveKey);
    assert.equal(live.code, 1);
    assert.match(live.stderr, /parley listen --webhook takes a test key \(svc_test_…\)/);
    const port = await cli({}, 'listen', '--url', base, '--key', t.key, '--port', '8443');
    assert.equal(port.code, 1);
    assert.equal(port.stderr.trim(), 'parley: --port applies to --webhook only');
    const types = await cli({}, 'listen', '--webhook', '--url', base, '--key', t.key, '--types', 'Message');
    assert.equal(types.code, 1);
    assert.equal(types.stderr.trim(), 'parley: --types applies to the event stream only (without --webhook)');
    const after = await cli({}, 'listen', '--url', base, '--key', t.key, '--after', '-1');
    assert.equal(after.code, 1);
    assert.equal(after.stderr.trim(), 'parley: --after must be a positive integer');
  });

  it('reconnects after the server drops the stream, resuming after the last event printed: no duplicate, no gap', async () => {
    const instance = await fresh();
    await record(instance, message(1), message(2));
    const { io, out, err } = capture();
    let stop = () => {};
    const stopped = new Promise<void>((resolve) => {
      stop = resolve;
    });
    const running = listenStream(
      { url: base, key: t.key, from: instance.id, after: 0, json: true, reconnectDelayMs: 50 },
      io,
      stopped,
    );
    const sequences = () => out.map((line) => JSON.parse(line).payload.sequence as number);
    try {
      await eventually('the backlog printed', () => out.length === 2);
      for (let round = 1; round <= 2; round++) {
        t.app.server.closeAllConnections();
        // recorded while the stream is down (or reconnecting): they come once, after the reconnect
        await record(instance, message(10 * round), receipt(10 * round));
        await eventually(`round ${round}: the events recorded meanwhile`, () => out.length === 2 + 2 * round);
        assert.ok(
          err.some((line) => line.includes('reconnected, resuming after #')),
          err.join('\n'),
        );
      }
      await record(instance, message(99));
      await eventually('the live event after the reconnects', () => out.length === 7);
    } finally {
      stop();
      await running;
    }
    assert.deepEqual(sequences(), [1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(
      out.map((line) => JSON.parse(line).payload),
      await logged(instance),
    );
  });

  it('without --from, keeps to the instance it started on across a reconnect, though another became the default', async () => {
    // The key's default is its most recently connected instance (docs/api.md): the first, then the second.
    const connectedAt = (instance: Instance, at: number) =>
      t.services.store.db
        .updateTable('instances')
        .set({ last_connected_at: at })
        .where('id', '=', instance.id)
        .execute();
    const first = await fresh();
    const second = await fresh();
    await connectedAt(first, Date.now() + 60_000);
    await record(first, message(1), message(2), message(3));
    await record(second, message(11), message(12), message(13), message(14), message(15));
    const { io, out } = capture();
    let stop = () => {};
    const stopped = new Promise<void>((resolve) => {
      stop = resolve;
    });
    const running = listenStream(
      { url: base, key: t.key, after: 0, json: true, reconnectDelayMs: 50 },
      io,
      stopped,
    );
    const printed = () =>
      out.map((line) => {
        const entry = JSON.parse(line).payload as { instanceId: string; sequence: number };
        return `${entry.instanceId === first.id ? 'first' : 'second'}#${entry.sequence}`;
      });
    try {
      await eventually("the first instance's backlog printed", () => out.length === 3);
      // The second instance connects (it becomes the key's default) while the stream is down.
      await connectedAt(second, Date.now() + 120_000);
      t.app.server.closeAllConnections();
      await record(first, message(4));
      await eventually('a fourth event printed', () => out.length >= 4);
    } finally {
      stop();
      await running;
    }
    assert.deepEqual(printed(), ['first#1', 'first#2', 'first#3', 'first#4']);
  });

  it('without --from, keeps to the instance of the first answer across a reconnect before any event (--after)', async () => {
    const connectedAt = (instance: Instance, at: number) =>
      t.services.store.db
        .updateTable('instances')
        .set({ last_connected_at: at })
        .where('id', '=', instance.id)
        .execute();
    const first = await fresh();
    const second = await fresh();
    await connectedAt(first, Date.now() + 180_000);
    await record(first, message(1), message(2), message(3));
    await record(second, message(11), message(12), message(13), message(14), message(15));
    const { io, out, err } = capture();
    let stop = () => {};
    const stopped = new Promise<void>((resolve) => {
      stop = resolve;
    });
    // Up to date on the first instance: nothing to print until its next event.
    const running = listenStream(
      { url: base, key: t.key, after: 3, json: true, reconnectDelayMs: 50 },
      io,
      stopped,
    );
    const printed = () =>
      out.map((line) => {
        const entry = JSON.parse(line).payload as { instanceId: string; sequence: number };
        return `${entry.instanceId === first.id ? 'first' : 'second'}#${entry.sequence}`;
      });
    try {
      await eventually('the stream open on the first instance', () =>
        err.some((line) => line.startsWith('Ready: waiting for events')),
      );
      // The second instance connects (it becomes the key's default); the stream drops before any event came.
      await connectedAt(second, Date.now() + 240_000);
      t.app.server.closeAllConnections();
      await record(first, message(4));
      await eventually('an event printed', () => out.length >= 1);
    } finally {
      stop();
      await running;
    }
    assert.deepEqual(printed(), ['first#4']);
  });

  it('ends with exit 1 naming the reason when the server ends the stream for good (the key revoked)', async () => {
    const instance = await fresh();
    const key = await t.newKey({ scopes: ['chat:webhook'] });
    await record(instance, message(1));
    const { io, out } = capture();
    const running = listenStream(
      { url: base, key, from: instance.id, after: 0, json: false },
      io,
      new Promise(() => {}),
    );
    await eventually('the first event', () => out.length === 1);
    const db = t.testStore.store.db;
    const row = await db
      .selectFrom('api_keys')
      .select('id')
      .where('key_hash', '=', hashApiKey(key))
      .executeTakeFirstOrThrow();
    await revokeApiKey(db, row.id);
    await assert.rejects(running, (error: unknown) => {
      assert.ok(error instanceof CliError);
      assert.equal(error.message, 'the event stream ended: 401 invalid API key');
      return true;
    });
  });
});

/**
 * `parley listen` reads the body with @parley/client's parser (packages/client/src/sse.ts, the module it imports;
 * the CLI kept a second parser of its own before): what the CLI needs of it. The `id` it also reads is not used by
 * the CLI. The suites above run the CLI built (bin/parley.js), so they read their streams with its compiled copy.
 */
describe('parley listen: reading the server-sent events body (WHATWG HTML 9.2.6) with the client library’s parser', () => {
  /** The events `serverSentEvents` reads from a body that arrives as `chunks`. */
  const parse = async (chunks: readonly string[]) => {
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
        controller.close();
      },
    });
    const events: unknown[] = [];
    for await (const event of serverSentEvents(body)) events.push(event);
    return events;
  };

  it('a CR LF split between two chunks is one end of line, wherever the body is cut', async () => {
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

  it('a CR alone ends a line, the last one of the body included', async () => {
    assert.deepEqual(await parse(['data: a\r\r', 'data: b\r', '\r']), [
      { event: 'message', data: 'a', id: undefined },
      { event: 'message', data: 'b', id: undefined },
    ]);
  });
});
