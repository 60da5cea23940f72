/**
 * A server-sent events stream whose client left before the stream started (while the request's hooks worked, so
 * its close event had passed when the route served it; docs/decisions/0031-event-stream.md): the stream ends at
 * once and keeps nothing, no commit subscription (whose tail would read the log every second for ever), heartbeat
 * or entry among the open streams. Served by the route's own transport over a real HTTP connection.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type OpenStreams, serveSse } from '../../src/http/routes/v1/event-stream-transports.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';

describe('server-sent events for a client gone before its stream started', () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(async () => {
    await t.close();
  });

  it('ends at once and keeps no tail, heartbeat or open entry', async () => {
    const open: OpenStreams = { streams: new Set(), closing: false };
    let served: Promise<void> | undefined;
    const server = createServer((_request, response) => {
      // As the route after its hooks, which ran while the client left: the response has closed already.
      response.once('close', () => {
        const tail = t.services.app.eventStream.open(t.instance, { after: 0, recheck: async () => {} });
        served = serveSse(response, tail, {
          requestId: 'gone',
          instanceId: t.instance.id,
          log: t.services.logger,
          open,
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const arrived = new Promise((resolve) => server.once('request', resolve));
      const socket = connect(port, '127.0.0.1');
      socket.write('GET /v1/events/stream HTTP/1.1\r\nHost: parley\r\nAccept: text/event-stream\r\n\r\n');
      // The request reached the server: the client goes.
      await arrived;
      socket.destroy();
      const serving = await eventually('the stream served', () => (served ? { served } : undefined));
      let ended = false;
      void serving.served.then(() => {
        ended = true;
      });
      await eventually('the stream ended', () => ended || undefined);
      assert.equal(t.services.commits.listeners, 0, 'the tail left the commit notifications');
      assert.equal(open.streams.size, 0, 'the stream left the open streams');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
