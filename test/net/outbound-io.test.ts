import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { OutboundError, OutboundGuard } from '../../src/net/outbound-guard.ts';
import { type Receiver, startReceiver, TEST_CA } from '../support/https-receiver.ts';

describe('error-mode body cap (docs/decisions/0017-messages-and-media.md media limits)', () => {
  let receiver: Receiver;
  before(async () => {
    receiver = await startReceiver();
  });
  after(() => receiver.close());

  it('refuses an announced oversize body that already arrived without leaving an uncaught stream error', async () => {
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', record);
    try {
      const guard = new OutboundGuard({ allowedCidrs: ['127.0.0.1/32'], ca: TEST_CA });
      const seen = receiver.requests.length;
      // Small enough to be in the client's buffer before the headers are judged.
      receiver.enqueue({ bytes: 5000 });
      await assert.rejects(
        () =>
          guard.request(receiver.url, {
            method: 'GET',
            timeoutMs: 5_000,
            maxResponseBytes: 1000,
            onTooLarge: 'error',
          }),
        (error: unknown) => error instanceof OutboundError && error.reason === 'too-large',
      );
      await receiver.waitFor((requests) => requests[seen]?.reply.state !== 'pending', 5_000);
      // The destroyed body reports its abort on a later turn of the event loop.
      await nextTurn();
      await nextTurn();
      assert.deepEqual(uncaught, []);
    } finally {
      process.off('uncaughtException', record);
    }
  });
});
