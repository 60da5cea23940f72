import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { sseReader } from '../support/sse.ts';
import { ENTERPRISE, listenersIdle } from '../support/stream-events.ts';
import { openWs } from '../support/ws.ts';

/**
 * The event stream, `GET /v1/events/stream` (docs/decisions/0031-event-stream.md), when its server closes
 * (docs/decisions/0023-operations.md): every open stream is ended with the shutdown's code, then unsubscribed.
 */

describe('event stream at shutdown (docs/decisions/0023-operations.md)', () => {
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
});
