import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OutboundGuard, type OutboundRequest } from '../../src/net/outbound-guard.ts';
import { startReceiver, TEST_CA } from '../support/https-receiver.ts';

// The receiver is shared test infrastructure (webhook tests use it too): its own behaviour is checked here.
const guard = new OutboundGuard({ allowedCidrs: ['127.0.0.1/32'], ca: TEST_CA });
const POST: OutboundRequest = {
  method: 'POST',
  body: 'x',
  timeoutMs: 5_000,
  maxResponseBytes: 4096,
  onTooLarge: 'truncate',
};

describe('test HTTPS receiver', () => {
  it('answers from the queue first, then the function, then the fallback', async () => {
    const receiver = await startReceiver({
      replies: [{ status: 500 }, { status: 500 }],
      respond: (request, index) => (index < 3 ? { status: 200, body: `#${index} ${request.method}` } : {}),
      fallback: { status: 418 },
    });
    try {
      const statuses: number[] = [];
      const bodies: string[] = [];
      for (let i = 0; i < 4; i++) {
        const response = await guard.request(receiver.url, POST);
        statuses.push(response.status);
        bodies.push(response.body.toString());
      }
      // The function answered index 3 with {} (a plain 200); the fallback is only for "no answer at all".
      assert.deepEqual(statuses, [500, 500, 200, 200]);
      assert.equal(bodies[2], '#2 POST');
      receiver.respondWith(() => ({ status: 204 }));
      receiver.enqueue({ status: 410 });
      assert.equal((await guard.request(receiver.url, POST)).status, 410);
      assert.equal((await guard.request(receiver.url, POST)).status, 204);
      assert.equal(receiver.requests.length, 6);
      assert.ok(
        receiver.requests.every(
          (request) => request.reply.state === 'completed' || request.reply.state === 'pending',
        ),
      );
    } finally {
      await receiver.close();
    }
  });

  it('uses the fallback when there is no queue and no function', async () => {
    const receiver = await startReceiver({ fallback: { status: 418, body: 'teapot' } });
    try {
      const response = await guard.request(receiver.url, POST);
      assert.equal(response.status, 418);
      assert.equal(response.body.toString(), 'teapot');
      const defaults = await startReceiver();
      try {
        assert.equal((await guard.request(defaults.url, POST)).body.toString(), 'ok');
      } finally {
        await defaults.close();
      }
    } finally {
      await receiver.close();
    }
  });

  it('records receive time and resolves waiters on arrival; rejects them on timeout', async () => {
    const receiver = await startReceiver();
    try {
      const waiting = receiver.waitForCount(2, 5_000);
      const before = Date.now();
      await guard.request(receiver.url, POST);
      await guard.request(receiver.url, POST);
      const seen = await waiting;
      assert.equal(seen.length, 2);
      assert.ok((seen[0]?.receivedAt ?? 0) >= before && (seen[1]?.receivedAt ?? 0) <= Date.now());
      await assert.rejects(receiver.waitForCount(3, 50), /not met within 50 ms \(2 requests\)/);
    } finally {
      await receiver.close();
    }
  });

  it('close() returns promptly while a delayed reply is pending', async () => {
    const receiver = await startReceiver({ replies: [{ delayMs: 60_000 }] });
    const pending = guard.request(receiver.url, { ...POST, timeoutMs: 60_000 });
    await receiver.waitForCount(1, 5_000);
    const started = Date.now();
    await receiver.close();
    assert.ok(Date.now() - started < 2_000);
    await assert.rejects(pending);
  });
});
