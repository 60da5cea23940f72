import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { streamEvents } from '../support/stream-events.ts';
import { RECIPIENT, runningParley } from './support.ts';

/**
 * @parley/client, built as shipped, talking to a listening parley through a TCP proxy that breaks real connections
 * at chosen moments (the other client suites replace answers inside `fetch`; here undici's own failures reach the
 * client): a send whose connection is reset once parley answered, or right after the request went out, is retried
 * with its one `Idempotency-Key` and carried out once (docs/decisions/0010-idempotency.md,
 * docs/decisions/0036-client-retries-a-key-in-progress.md); a 503 whose `Retry-After` is an HTTP date is waited out
 * (docs/client.md "Retries and idempotency"); an event stream cut in the middle of an event resumes after the last
 * whole event, with no gap and no duplicate (docs/decisions/0034-client-stream-transport.md).
 */

/** What the proxy does with one request (each request takes the next mode queued; none queued: `pass`). */
type Mode =
  /** Relays the request and its answer. */
  | 'pass'
  /** Relays the request; when parley's answer starts, resets the client's connection (the answer is lost). */
  | 'reset-at-answer'
  /**
   * Relays the request, then resets the client's connection at once, while parley may still be running it (its
   * connection to parley stays open, so parley finishes the request; the answer goes nowhere).
   */
  | 'reset-after-request'
  /** Relays the request; of the first chunk of its answer that carries events, relays half, then resets. */
  | 'cut-mid-event'
  /** Answers these bytes itself, without relaying the request. */
  | { answer: string };

/** A proxy in front of `port`: `modes` queues what it does with the next requests; `requests` their request lines. */
async function breakingProxy(port: number) {
  const modes: Mode[] = [];
  const requests: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    let mode: Mode = 'pass';
    /** What came of the current request, while its mode needs to know where it ends. */
    let request = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      const line = /^(GET|POST|PUT|PATCH|DELETE) \S+/.exec(chunk.toString('latin1'));
      if (line) {
        mode = modes.shift() ?? 'pass';
        request = Buffer.alloc(0);
        requests.push(line[0]);
      }
      if (typeof mode === 'object') {
        client.end(mode.answer);
        upstream.destroy();
        return;
      }
      upstream.write(chunk);
      if (mode === 'reset-after-request') {
        // Once the whole request (its headers and `content-length` bytes of body) went to parley.
        request = Buffer.concat([request, chunk]);
        const head = request.indexOf('\r\n\r\n');
        const length = /\r\ncontent-length: *(\d+)/i.exec(request.subarray(0, head).toString('latin1'));
        if (head >= 0 && request.length - head - 4 >= Number(length?.[1] ?? 0)) client.resetAndDestroy();
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (mode === 'reset-at-answer' || mode === 'reset-after-request') {
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      if (mode === 'cut-mid-event' && chunk.includes('"sequence"')) {
        client.write(chunk.subarray(0, Math.floor(chunk.length / 2)), () => client.resetAndDestroy());
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    upstream.on('end', () => client.end());
    client.on('end', () => upstream.end());
    client.on('close', () => {
      // A request whose client was reset keeps its connection to parley until its answer comes (and is dropped,
      // above), so it runs to its end as behind a client that lost its network.
      if (mode !== 'reset-after-request') upstream.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}`,
    modes,
    requests,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

for (const dialect of testDialects()) {
  describe(`@parley/client over connections that break (${dialect})`, () => {
    const server = runningParley(dialect);
    let proxy: Awaited<ReturnType<typeof breakingProxy>>;
    before(async () => {
      proxy = await breakingProxy(Number(new URL(server.baseUrl).port));
    });
    after(() => proxy.close());

    /** A client of parley through the proxy, retrying after 10 ms. */
    const throughProxy = (options: { instance?: string } = {}) =>
      server.clientWith({ baseUrl: proxy.url, retries: { minDelayMs: 10 }, ...options });

    it('a send whose connection is reset as parley answers is retried with its key: one message, the first answer', async () => {
      const text = `reset at the answer ${dialect}`;
      const from = proxy.requests.length;
      proxy.modes.push('reset-at-answer');
      const sent = await throughProxy().sendText({ phone: RECIPIENT, body: text });
      assert.equal(sent.details, 'Sent');
      assert.deepEqual(proxy.requests.slice(from), ['POST /v1/messages/send', 'POST /v1/messages/send']);
      assert.equal(await server.stored(text), 1, 'parley carried the send out once');
      const message = await server.t.call('GET', `/v1/messages/${sent.id}`);
      assert.equal(message.status, 200, 'the answer the retry got names the message the first attempt sent');
    });

    it('a send whose connection breaks right after the request went out is carried out once', async () => {
      const text = `reset after the request ${dialect}`;
      const from = proxy.requests.length;
      proxy.modes.push('reset-after-request');
      const sent = await throughProxy().sendText({ phone: RECIPIENT, body: text });
      assert.equal(sent.details, 'Sent');
      assert.ok(proxy.requests.length - from >= 2, proxy.requests.slice(from).join('\n'));
      assert.equal(await server.stored(text), 1);
    });

    it('a 503 whose Retry-After is an HTTP date is waited out, then the send goes once', async () => {
      const text = `retry after a date ${dialect}`;
      const from = proxy.requests.length;
      const at = new Date(Date.now() + 2000).toUTCString(); // 1 to 2 s ahead: whole seconds
      proxy.modes.push({
        answer: `HTTP/1.1 503 Service Unavailable\r\nretry-after: ${at}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
      });
      const started = Date.now();
      const sent = await throughProxy().sendText({ phone: RECIPIENT, body: text });
      assert.equal(sent.details, 'Sent');
      assert.ok(Date.now() - started >= 1000, `waited ${Date.now() - started} ms`);
      assert.deepEqual(proxy.requests.slice(from), ['POST /v1/messages/send', 'POST /v1/messages/send']);
      assert.equal(await server.stored(text), 1);
    });

    it('an event stream cut in the middle of an event resumes after the last whole one: no gap, no duplicate', async () => {
      const instance = await server.t.newInstance('test', `client-cut-${dialect}`);
      const { message } = streamEvents('3EB0CC');
      const record = async (...ns: number[]) => {
        for (const n of ns) await server.t.services.recorder.record(instance.id, message(n));
      };
      await record(1);
      const stop = new AbortController();
      const got: number[] = [];
      // The backlog's one page passes; the stream opened after it has its second event cut in half.
      proxy.modes.push('pass', 'cut-mid-event');
      const stream = throughProxy({ instance: instance.id }).events({ signal: stop.signal });
      const loop = (async () => {
        for await (const event of stream) got.push(event.sequence);
      })();
      await eventually('the backlog', () => got.length === 1);
      await eventually('the stream opened', () =>
        proxy.requests.some((request) => request.startsWith('GET /v1/events/stream')),
      );
      for (let n = 2; n <= 6; n++) await record(n);
      await eventually('every event', () => got.length >= 6);
      stop.abort();
      await loop;
      assert.deepEqual(got, [1, 2, 3, 4, 5, 6]);
      const streams = proxy.requests.filter((request) => request.startsWith('GET /v1/events/stream'));
      assert.ok(streams.length >= 2, `reopened: ${streams.join(', ')}`);
      assert.equal(stream.cursor, 6);
    });
  });
}
