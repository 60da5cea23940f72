import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { SHUTDOWN_GRACE_MS } from '../../src/http/routes/v1/event-stream-transports.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { holdCalls } from '../support/held-calls.ts';
import { sseReader } from '../support/sse.ts';
import { ENTERPRISE, listenersIdle, streamEvents } from '../support/stream-events.ts';
import { openWs } from '../support/ws.ts';

/**
 * The event stream, `GET /v1/events/stream` (docs/decisions/0031-event-stream.md), when its server closes
 * (docs/decisions/0023-operations.md): every open stream is ended with the shutdown's code, then unsubscribed, and
 * so is a stream whose request was still in its hooks when the close began: streams never hold a stop back.
 */

const { message } = streamEvents('3EB0EE');

/** A message of `size` characters, numbered `n` (ids of their own in this file). */
function bigMessage(n: number, size: number) {
  const event = message(n);
  if (event.type !== 'message') throw new Error('streamEvents.message is a message');
  return {
    ...event,
    message: { ...event.message, content: { kind: 'text' as const, text: 'x'.repeat(size) } },
  };
}

/**
 * Holds every stream request of `t` in its `preHandler` (at the position check, after auth and the instance's
 * resolution) until `release` is called; `held` resolves once a request is waiting there.
 */
function holdStreamOpening(t: TestApp): { held: Promise<void>; release: () => void } {
  const log = t.services.app.eventLog;
  return holdCalls(log.checkPosition.bind(log), (holding) => {
    log.checkPosition = holding;
  });
}

/**
 * Starts closing `t`'s app while a stream request is held in its hooks, waits until the close is past the route's
 * `preClose` hook (the server stopped listening), then lets the request go on. → the close under way, and a flag
 * saying whether it finished.
 */
async function closeWhileOpening(
  t: TestApp,
  hold: { held: Promise<void>; release: () => void },
): Promise<{ closing: Promise<void>; closed: () => boolean }> {
  await hold.held;
  let closed = false;
  const closing = t.app.close().then(() => {
    closed = true;
  });
  await eventually('the close past its preClose hooks', () => !t.app.server.listening);
  hold.release();
  return { closing, closed: () => closed };
}

describe('event stream at shutdown (docs/decisions/0023-operations.md)', () => {
  for (const form of ['server-sent events', 'WebSocket'] as const) {
    it(`${form}: a consumer that stopped reading does not hold the close: its connection is cut after the grace`, async () => {
      const t = await createTestApp({ plan: ENTERPRISE });
      const base = new URL(await t.app.listen({ host: '127.0.0.1', port: 0 }));
      // 12 MB of events: more than the kernel's buffers on both sides hold, so the server's writes back up.
      await Promise.all(
        Array.from({ length: 300 }, (_, i) =>
          t.services.recorder.record(t.instance.id, bigMessage(i + 1, 40_000)),
        ),
      );
      const socket = connect(Number(base.port), '127.0.0.1');
      socket.on('error', () => undefined);
      socket.pause();
      const head = `GET /v1/events/stream?from=${t.instance.id} HTTP/1.1\r\nHost: parley\r\nAuthorization: Bearer ${t.key}\r\n`;
      socket.write(
        form === 'WebSocket'
          ? `${head}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`
          : `${head}Accept: text/event-stream\r\n\r\n`,
      );
      try {
        await eventually('the stream listens for commits', () => listenersIdle(t, 1));
        // The stream's first page fills the buffers; the tail waits for them to drain.
        await new Promise((resolve) => setTimeout(resolve, 500));
        const started = performance.now();
        const outcome = await Promise.race([
          t.app.close().then(() => 'closed'),
          new Promise((resolve) => setTimeout(() => resolve('held'), 5000).unref()),
        ]);
        const took = performance.now() - started;
        assert.equal(outcome, 'closed', 'the stalled consumer held app.close()');
        assert.ok(took >= SHUTDOWN_GRACE_MS - 50, `closed after ${took} ms: the end was given its grace`);
        assert.ok(listenersIdle(t), 'the stream unsubscribed');
        assert.ok(socket.destroyed || (await closedSoon(socket)), "the consumer's connection was cut");
      } finally {
        socket.destroy();
        t.app.server.closeAllConnections();
        await t.services.close({ keepStore: true });
        await t.testStore.cleanup();
      }
    });
  }

  it('closing the server ends every stream: WebSocket 1001, server-sent events `end` 503', async () => {
    const t = await createTestApp({ plan: ENTERPRISE });
    const base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const headers = { authorization: `Bearer ${t.key}` };
      const client = await openWs(
        `${base.replace(/^http/, 'ws')}/v1/events/stream?from=${t.instance.id}`,
        headers,
      );
      const response = await fetch(`${base}/v1/events/stream?from=${t.instance.id}`, {
        headers: { ...headers, accept: 'text/event-stream' },
      });
      assert.ok(response.body);
      const reader = sseReader(response.body);
      await eventually('both streams listen for commits', () => listenersIdle(t, 2));
      await t.app.close();
      assert.deepEqual(await client.closed, { code: 1001, reason: 'server shutting down' });
      assert.deepEqual((await reader.next('end')).data, {
        error: { code: 503, message: 'server shutting down' },
      });
      await reader.ended();
      assert.ok(listenersIdle(t), 'the closed streams unsubscribed');
    } finally {
      await t.services.close({ keepStore: true });
      await t.testStore.cleanup();
    }
  });

  it('server-sent events opened while the close began (the request still in its hooks) end at once with `end` 503', async () => {
    const t = await createTestApp({ plan: ENTERPRISE });
    const base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    await t.services.recorder.record(t.instance.id, message(1));
    const hold = holdStreamOpening(t);
    const answer = fetch(`${base}/v1/events/stream?from=${t.instance.id}&after=1`, {
      headers: { authorization: `Bearer ${t.key}`, accept: 'text/event-stream' },
    });
    const { closing, closed } = await closeWhileOpening(t, hold);
    try {
      const response = await answer;
      assert.equal(response.status, 200);
      await eventually('the close finished, not held by the stream', closed);
      assert.ok(response.body);
      const reader = sseReader(response.body);
      assert.deepEqual((await reader.next('end')).data, {
        error: { code: 503, message: 'server shutting down' },
      });
      await reader.ended();
      assert.ok(listenersIdle(t), 'the stream unsubscribed');
    } finally {
      t.app.server.closeAllConnections();
      await closing;
      await t.services.close({ keepStore: true });
      await t.testStore.cleanup();
    }
  });

  it('a WebSocket opened while the close began (the upgrade still in its hooks) is closed at once with 1001', async () => {
    const t = await createTestApp({ plan: ENTERPRISE });
    const base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    await t.services.recorder.record(t.instance.id, message(1));
    const hold = holdStreamOpening(t);
    const opening = openWs(`${base.replace(/^http/, 'ws')}/v1/events/stream?from=${t.instance.id}&after=1`, {
      authorization: `Bearer ${t.key}`,
    });
    const { closing, closed } = await closeWhileOpening(t, hold);
    const client = await opening;
    try {
      await eventually('the close finished, not held by the stream', closed);
      assert.deepEqual(await client.closed, { code: 1001, reason: 'server shutting down' });
      assert.ok(listenersIdle(t), 'the stream unsubscribed');
    } finally {
      client.socket.terminate();
      t.app.server.closeAllConnections();
      await closing;
      await t.services.close({ keepStore: true });
      await t.testStore.cleanup();
    }
  });
});

/** Whether the server closed `socket` (its paused reading side sees the end once resumed), within a second. */
async function closedSoon(socket: Socket): Promise<boolean> {
  socket.resume();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), 1000);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
