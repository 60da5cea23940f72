import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

/**
 * A real HTTPS server for tests of outbound requests (webhook deliveries, media fetches): it records every
 * request and answers from a programmable queue or function. TLS uses the committed self-signed certificate
 * in `test/fixtures/tls/` (CN=localhost, SAN IP:127.0.0.1 and DNS:localhost, valid 100 years); clients
 * trust it by passing {@link TEST_CA} as their extra CA (OutboundGuard option `ca`).
 */

const fixture = (name: string) => readFileSync(new URL(`../fixtures/tls/${name}`, import.meta.url), 'utf8');

/** PEM of the self-signed test certificate; pass it as the trusted CA (it is its own issuer). */
export const TEST_CA: string = fixture('cert.pem');
/** PEM of the test certificate (same as {@link TEST_CA}). */
export const TEST_CERT: string = TEST_CA;
/** PEM private key of the test certificate. */
export const TEST_KEY: string = fixture('key.pem');

/** What the receiver answers to one request. Every field is optional: `{}` is a 200 with an empty body. */
export interface ReceiverReply {
  /** HTTP status, default 200. */
  status?: number;
  /** Response headers (e.g. `location`, `retry-after`, `content-type`). */
  headers?: Record<string, string | number | string[]>;
  /** Body; default empty. Ignored when `bytes` is set. */
  body?: string | Buffer;
  /** Send {@link mediaBytes}(`bytes`) as the body instead of `body`. */
  bytes?: number;
  /** Wait this long before sending the status line, ms (timeout tests). Cancelled if the client hangs up. */
  delayMs?: number;
  /** Send the status line and headers at once, then wait this long before the body, ms. */
  bodyDelayMs?: number;
  /** Write the body in pieces of this many bytes (default: in one write). */
  chunkSize?: number;
  /** Pause between pieces, ms (default 0: the next piece goes when the socket drains). */
  chunkIntervalMs?: number;
  /** Leave out `content-length` so the body goes with chunked transfer encoding (default: false). */
  chunked?: boolean;
}

/** What became of the receiver's answer to one request. */
export interface ReplyOutcome {
  /** `pending` while the answer is being sent; `completed` when fully written; `aborted` when the client
   * closed the connection first. */
  state: 'pending' | 'completed' | 'aborted';
  status: number | undefined;
  /** Body bytes handed to the socket so far. */
  bytesSent: number;
}

/** One request as the receiver saw it. */
export interface ReceivedRequest {
  method: string;
  /** Path and query, e.g. `/hook?x=1`. */
  url: string;
  /** Headers, names lowercased (Node's `IncomingHttpHeaders`). */
  headers: IncomingHttpHeaders;
  /** Raw body bytes exactly as received. */
  body: Buffer;
  /** `Date.now()` when the whole body had arrived, ms since the epoch. */
  receivedAt: number;
  /** TLS SNI the client sent (false when it sent none, e.g. for an IP literal). */
  servername: string | false;
  /** Local address the request came in on (which listener received it). */
  localAddress: string;
  /** The client's port: requests with the same one came over the same connection. */
  remotePort: number;
  /** Updated live while the reply is written; wait on it with {@link Receiver.waitFor}. */
  reply: ReplyOutcome;
}

/** Decides the reply to request number `index` (0-based, counting every request the receiver got). */
export type Responder = (request: ReceivedRequest, index: number) => ReceiverReply | Promise<ReceiverReply>;

/** Options of {@link startReceiver}. */
export interface ReceiverOptions {
  /** Address to listen on, default `127.0.0.1` (the certificate also covers the name `localhost`). */
  host?: string;
  /** Port to listen on, default 0 (a free one). Lets two receivers share a port on different addresses. */
  port?: number;
  /** Path used in {@link Receiver.url}, default `/hook`. The server answers on every path. */
  path?: string;
  /** Replies used first, one per request, in order. */
  replies?: ReceiverReply[];
  /** Decides replies once the queue is empty. */
  respond?: Responder;
  /** Reply when neither the queue nor `respond` gives one; default `{ status: 200, body: 'ok' }`. */
  fallback?: ReceiverReply;
}

/** A running receiver. */
export interface Receiver {
  /** `https://127.0.0.1:PORT/hook` (host and path from the options). */
  readonly url: string;
  /** `https://127.0.0.1:PORT`. */
  readonly origin: string;
  readonly port: number;
  /** Every request received so far (since {@link forget}), in arrival order. */
  readonly requests: readonly ReceivedRequest[];
  /** Drops the requests recorded so far: a test's set-up request is not one of its own. */
  forget(): void;
  /** Adds replies at the end of the queue. */
  enqueue(...replies: ReceiverReply[]): void;
  /** Replaces the function used once the queue is empty. */
  respondWith(responder: Responder): void;
  /**
   * Resolves with the requests as soon as `predicate` holds, re-checked on every change (a request arrives,
   * a reply completes or is aborted). Rejects after `timeoutMs` ms naming the number of requests seen.
   */
  waitFor(
    predicate: (requests: readonly ReceivedRequest[]) => boolean,
    timeoutMs: number,
  ): Promise<readonly ReceivedRequest[]>;
  /** {@link waitFor} at least `count` requests. */
  waitForCount(count: number, timeoutMs: number): Promise<readonly ReceivedRequest[]>;
  /** Stops listening, cuts open connections, cancels pending delays. */
  close(): Promise<void>;
}

/**
 * Deterministic test content: byte `i` is `i % 251` (a prime, so a shifted or cut stream does not match).
 * @param size length in bytes.
 */
export function mediaBytes(size: number): Buffer {
  const buffer = Buffer.alloc(size);
  for (let i = 0; i < size; i++) buffer[i] = i % 251;
  return buffer;
}

/** Starts an HTTPS receiver on `host`:`port` (default 127.0.0.1, a free port). See {@link Receiver}. */
export async function startReceiver(options: ReceiverOptions = {}): Promise<Receiver> {
  const host = options.host ?? '127.0.0.1';
  const path = options.path ?? '/hook';
  const queue: ReceiverReply[] = [...(options.replies ?? [])];
  let responder: Responder | undefined = options.respond;
  const fallback = options.fallback ?? { status: 200, body: 'ok' };
  const requests: ReceivedRequest[] = [];
  const listeners = new Set<() => void>();
  const timers = new Set<NodeJS.Timeout>();
  const sockets = new Set<Socket>();
  const notify = () => {
    for (const listener of [...listeners]) listener();
  };

  const later = (ms: number, run: () => void): NodeJS.Timeout => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      run();
    }, ms);
    timers.add(timer);
    return timer;
  };

  const send = (res: ServerResponse, record: ReceivedRequest, reply: ReceiverReply) => {
    const status = reply.status ?? 200;
    const body = reply.bytes !== undefined ? mediaBytes(reply.bytes) : Buffer.from(reply.body ?? '');
    record.reply.status = status;
    const headers: Record<string, string | number | string[]> = { ...(reply.headers ?? {}) };
    if (!reply.chunked) headers['content-length'] = body.length;
    res.writeHead(status, headers);
    const size = reply.chunkSize ?? body.length;
    let offset = 0;
    const writeNext = () => {
      if (res.destroyed) return;
      if (offset >= body.length) {
        res.end();
        return;
      }
      const piece = body.subarray(offset, offset + Math.max(1, size));
      offset += piece.length;
      record.reply.bytesSent += piece.length;
      const flushed = res.write(piece);
      const interval = reply.chunkIntervalMs ?? 0;
      if (interval > 0) later(interval, writeNext);
      else if (flushed) setImmediate(writeNext);
      else res.once('drain', writeNext);
    };
    if (reply.bodyDelayMs !== undefined && reply.bodyDelayMs > 0) {
      res.flushHeaders();
      later(reply.bodyDelayMs, writeNext);
    } else {
      writeNext();
    }
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const socket = req.socket as TLSSocket;
      const record: ReceivedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
        receivedAt: Date.now(),
        servername: socket.servername ?? false,
        localAddress: socket.localAddress ?? '',
        remotePort: socket.remotePort ?? 0,
        reply: { state: 'pending', status: undefined, bytesSent: 0 },
      };
      const index = requests.length;
      requests.push(record);
      res.on('close', () => {
        record.reply.state = res.writableFinished ? 'completed' : 'aborted';
        notify();
      });
      notify();
      const next = queue.shift();
      Promise.resolve(next ?? responder?.(record, index) ?? fallback).then(
        (reply) => {
          if (res.destroyed) return;
          if (reply.delayMs !== undefined && reply.delayMs > 0) {
            const timer = later(reply.delayMs, () => send(res, record, reply));
            res.on('close', () => {
              clearTimeout(timer);
              timers.delete(timer);
            });
          } else {
            send(res, record, reply);
          }
        },
        (error: unknown) => {
          res.writeHead(500).end(String(error));
        },
      );
    });
  };

  const server: Server = createServer({ cert: TEST_CERT, key: TEST_KEY }, handle);
  server.on('secureConnection', (socket: TLSSocket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  // A client that drops the TLS handshake (e.g. an untrusted certificate) is not an error for the tests.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const hostInUrl = host.includes(':') ? `[${host}]` : host;
  const origin = `https://${hostInUrl}:${port}`;

  const waitFor: Receiver['waitFor'] = (predicate, timeoutMs) =>
    new Promise((resolve, reject) => {
      const check = () => {
        if (!predicate(requests)) return;
        clearTimeout(timer);
        listeners.delete(check);
        resolve(requests);
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`receiver: condition not met within ${timeoutMs} ms (${requests.length} requests)`));
      }, timeoutMs);
      listeners.add(check);
      check();
    });

  return {
    url: `${origin}${path}`,
    origin,
    port,
    requests,
    forget: () => {
      requests.length = 0;
    },
    enqueue: (...replies) => {
      queue.push(...replies);
    },
    respondWith: (next) => {
      responder = next;
    },
    waitFor,
    waitForCount: (count, timeoutMs) => waitFor((seen) => seen.length >= count, timeoutMs),
    close: async () => {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Options of {@link startMediaServer}. */
export interface MediaServerOptions {
  /** Body size, bytes; the content is {@link mediaBytes}(`bytes`). */
  bytes: number;
  /** `content-type` header, default `application/octet-stream`. */
  contentType?: string;
  /** Piece size, bytes (default 16,384). */
  chunkSize?: number;
  /** Pause between pieces, ms (default 0). */
  chunkIntervalMs?: number;
  /** Send `content-length` (default true); false streams with chunked transfer encoding. */
  contentLength?: boolean;
  /** Address to listen on, default `127.0.0.1`. */
  host?: string;
  /** Path used in the URL, default `/media`. */
  path?: string;
}

/**
 * A streaming file server for media-fetch tests: every request gets `bytes` bytes of {@link mediaBytes},
 * written in pieces (optionally slowly), so "oversize stream cut off" can be observed: the request's
 * `reply.state` becomes `aborted` with `reply.bytesSent` below `bytes` when the client stops reading.
 */
export function startMediaServer(options: MediaServerOptions): Promise<Receiver> {
  return startReceiver({
    host: options.host,
    path: options.path ?? '/media',
    fallback: {
      status: 200,
      headers: { 'content-type': options.contentType ?? 'application/octet-stream' },
      bytes: options.bytes,
      chunkSize: options.chunkSize ?? 16_384,
      chunkIntervalMs: options.chunkIntervalMs ?? 0,
      chunked: options.contentLength === false,
    },
  });
}

/**
 * The `webhook-id`s under which each `Message` event was delivered (answered 200), by message id: a message
 * delivered once under one event id maps to a set of one.
 */
export function webhookIdsByMessage(requests: readonly ReceivedRequest[]): Map<string, Set<string>> {
  const byMessage = new Map<string, Set<string>>();
  for (const request of requests) {
    if (request.reply.state !== 'completed' || request.reply.status !== 200) continue;
    const body = JSON.parse(request.body.toString()) as { type: string; event?: { info?: { id?: string } } };
    const id = body.type === 'Message' ? body.event?.info?.id : undefined;
    if (id === undefined) continue;
    const set = byMessage.get(id) ?? new Set<string>();
    set.add(String(request.headers['webhook-id']));
    byMessage.set(id, set);
  }
  return byMessage;
}
