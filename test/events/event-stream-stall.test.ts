import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { HEARTBEAT_MS } from '../../src/http/routes/v1/event-stream-transports.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { sseReader } from '../support/sse.ts';
import { testDialects } from '../support/store.ts';
import { ENTERPRISE, listenersIdle, streamEvents } from '../support/stream-events.ts';

/**
 * A server-sent events consumer that stops reading (docs/decisions/0031-event-stream.md "Slow consumers"): it holds
 * one page on the server, and once it has taken nothing of that page for a whole heartbeat interval it is cut, as a
 * WebSocket peer that answers no ping is, instead of holding its connection, its page and its tail for ever (no
 * recheck runs while the page waits, so neither a revoked key nor a removed instance would end it). Nothing is lost:
 * it resumes with the `id` of the last whole event it got. The heartbeat's interval is run by hand (mocked
 * `setInterval`), the rest on real time.
 */

const { message } = streamEvents('3EB0D5');

/** Message `n` with a text of `size` characters. */
function bigMessage(n: number, size: number) {
  const event = message(n);
  if (event.type !== 'message') throw new Error('streamEvents.message is a message');
  return {
    ...event,
    message: { ...event.message, content: { kind: 'text' as const, text: 'x'.repeat(size) } },
  };
}

/** The `id`s of the whole events (ended by a blank line) in a server-sent events body. */
function wholeEventIds(body: string): number[] {
  const blocks = body.split('\n\n');
  blocks.pop(); // what follows the last blank line is not a whole event
  return blocks.flatMap((block) => {
    const id = /^id: (\d+)$/m.exec(block)?.[1];
    return id === undefined ? [] : [Number(id)];
  });
}

const COUNT = 300;

for (const dialect of testDialects()) {
  describe(`event stream: a server-sent events consumer that stops reading [${dialect}]`, () => {
    let t: TestApp;
    let port: number;

    before(async () => {
      t = await createTestApp({ dialect, plan: ENTERPRISE });
      port = Number(new URL(await t.app.listen({ host: '127.0.0.1', port: 0 })).port);
      // 12 MB of events: more than the kernel's buffers on both sides hold, so the server's writes back up.
      await Promise.all(
        Array.from({ length: COUNT }, (_, i) =>
          t.services.recorder.record(t.instance.id, bigMessage(i + 1, 40_000)),
        ),
      );
    });
    after(() => t.close());

    it('is cut once its page waited a whole heartbeat interval, and resumes with Last-Event-ID, losing nothing', async (test) => {
      let response: ServerResponse | undefined;
      t.app.server.once('request', (_request, raw: ServerResponse) => {
        response = raw;
      });
      test.mock.timers.enable({ apis: ['setInterval'] });
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.pause();
      socket.write(
        `GET /v1/events/stream?from=${t.instance.id} HTTP/1.1\r\nHost: parley\r\nAuthorization: Bearer ${t.key}\r\nAccept: text/event-stream\r\n\r\n`,
      );
      try {
        const served = await eventually('the stream served', () => response);
        await eventually(
          'the stream waits for its consumer to take its page',
          () => served.writableNeedDrain,
        );
        // The first heartbeat finds the page waiting; the second finds it still waiting: nothing was taken for a whole
        // interval. A WebSocket peer is cut after the same time (the ping behind its page goes unanswered).
        test.mock.timers.tick(HEARTBEAT_MS);
        assert.equal(served.destroyed, false, 'not cut before a whole interval passed');
        test.mock.timers.tick(HEARTBEAT_MS);
        await eventually('the stalled consumer was cut', () => served.destroyed);
        await eventually('the cut stream left the commit notifications', () => listenersIdle(t));
      } finally {
        test.mock.timers.reset();
      }

      // The consumer reads what reached it before the cut, and resumes after the last whole event.
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      const ended = new Promise((resolve) => socket.once('close', resolve));
      socket.resume();
      await ended;
      const text = Buffer.concat(chunks).toString('utf8');
      const got = wholeEventIds(text.slice(text.indexOf('\r\n\r\n') + 4));
      assert.ok(
        got.length > 0 && got.length < COUNT,
        `${got.length} events reached the consumer before the cut`,
      );
      assert.deepEqual(
        got,
        Array.from({ length: got.length }, (_, i) => i + 1),
      );
      const last = got.at(-1) ?? 0;
      const resumed = await fetch(`http://127.0.0.1:${port}/v1/events/stream?from=${t.instance.id}`, {
        headers: {
          authorization: `Bearer ${t.key}`,
          accept: 'text/event-stream',
          'last-event-id': String(last),
        },
      });
      assert.equal(resumed.status, 200);
      assert.ok(resumed.body);
      const reader = sseReader(resumed.body);
      const rest: number[] = [];
      try {
        for (let sequence = last + 1; sequence <= COUNT; sequence++)
          rest.push(Number((await reader.next()).id));
      } finally {
        await reader.cancel();
      }
      assert.deepEqual(
        rest,
        Array.from({ length: COUNT - last }, (_, i) => last + 1 + i),
      );
    });
  });
}
