import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { addClosingHooks } from '../../src/http/closing.ts';

/** Size of the answer a slow reader takes while the app closes, bytes: more than the kernel's buffers hold. */
const LARGE_BYTES = 24 * 1024 * 1024;

describe('closing hooks (docs/decisions/0064-closing-connections.md)', () => {
  it('an answer ended before the close began reaches a slow reader whole, then its connection ends', async () => {
    const app = Fastify();
    addClosingHooks(app);
    const large = Buffer.alloc(LARGE_BYTES, 0x61);
    let ended = (): void => undefined;
    const answerEnded = new Promise<void>((resolve) => {
      ended = resolve;
    });
    app.get('/large', async (_request, reply) => {
      // `prefinish`: the answer is ended, its last bytes handed to the connection (not yet to the reader).
      reply.raw.once('prefinish', () => ended());
      return reply.header('content-type', 'text/plain').send(large);
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;

    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let received = 0;
    const chunks: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // Read nothing yet: the answer is ended on the server while most of it still waits in its buffers.
    socket.pause();
    socket.write('GET /large HTTP/1.1\r\nHost: x\r\n\r\n');
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (chunks.length === 0) chunks.push(chunk);
    });
    await answerEnded;
    // The server has written what the kernel takes; the close begins before the reader reads.
    const closing = app.close();
    socket.resume();
    await closing;
    await closed;
    const head = chunks[0]?.toString('latin1') ?? '';
    const headerBytes = head.indexOf('\r\n\r\n') + 4;
    assert.match(head, /^HTTP\/1\.1 200/);
    assert.equal(received - headerBytes, LARGE_BYTES, 'every byte of the answer arrived');
  });
});
