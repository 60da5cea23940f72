import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { type SecureContext, type TLSSocket, connect as tlsConnect } from 'node:tls';
import type { buildConnector } from 'undici';
import type { RequestSignal } from '../domain/withdrawal.ts';
import { hostnameOf } from './addresses.ts';
import { OutboundError, toOutboundError } from './outbound-errors.ts';
import type { OutboundRequest } from './outbound-guard.ts';

/**
 * Socket and stream helpers of the outbound guard (docs/decisions/0020-security-promises.md), kept apart from its
 * policy.
 */

/** Where and how {@link dialTls} connects. */
export interface DialOptions {
  /** IP literal to connect to (already checked). */
  address: string;
  port: number;
  /** Hostname for SNI and the certificate check; undefined for an IP-literal URL (IP SANs are checked). */
  servername: string | undefined;
  /** TLS context carrying the trusted CAs, or undefined for Node's bundled roots. */
  secureContext: SecureContext | undefined;
  /** Time allowed for TCP connect and TLS handshake, ms. */
  timeoutMs: number;
  /** Aborts the attempt (the request's overall deadline). */
  signal: AbortSignal;
}

/**
 * Opens a TLS connection to one IP (docs/decisions/0020-security-promises.md pinning: no name resolution happens
 * here); resolves once the handshake and certificate checks succeed.
 * @throws OutboundError `timeout` (too slow or aborted); the socket's own error (TLS, ECONNREFUSED, …)
 *   otherwise, for {@link toOutboundError} to classify.
 */
export function dialTls(options: DialOptions): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host: options.address,
      port: options.port,
      // SNI and the certificate identity check use the hostname; for an IP literal Node checks IP SANs.
      servername: options.servername,
      secureContext: options.secureContext,
      ALPNProtocols: ['http/1.1'],
    });
    const fail = (error: Error) => {
      cleanup();
      socket.destroy();
      reject(error);
    };
    const onAbort = () => fail(new OutboundError('timeout', `connecting to ${options.address} was aborted`));
    const timer = setTimeout(
      () => fail(new OutboundError('timeout', `connecting to ${options.address} timed out`)),
      options.timeoutMs,
    );
    const cleanup = () => {
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      socket.off('error', fail);
    };
    options.signal.addEventListener('abort', onAbort, { once: true });
    socket.once('error', fail);
    socket.once('secureConnect', () => {
      cleanup();
      socket.setNoDelay(true);
      resolve(socket);
    });
  });
}

/** The part of a response body stream {@link readCapped} uses. */
export interface ReadableBody extends AsyncIterable<unknown> {
  destroy(error?: Error): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/**
 * Reads a response body up to `request.maxResponseBytes` bytes (media cap: docs/decisions/0017-messages-and-media.md;
 * first 2 KB of a webhook answer). Truncate mode returns the first bytes and `truncated: true` once more arrive;
 * error mode refuses an announced `content-length` over the cap before reading, or stops at the first byte over.
 * Leaving early destroys the stream, except in truncate mode with `drain`: the rest is then read and dropped, so a
 * connection other requests were written on behind this one stays open for them
 * (docs/decisions/0058-pipelined-lanes.md); the request's own deadline still bounds the read, and a rest that fails
 * or is cut off by it returns what was kept with `drained: false` (the caller closes the connection).
 * @throws OutboundError `too-large` (error mode); the stream's error (the deadline's reason) before the cap.
 */
export async function readCapped(
  body: ReadableBody,
  headers: Record<string, string>,
  request: OutboundRequest,
  url: URL,
  drain = false,
): Promise<{ body: Buffer; truncated: boolean; drained: boolean }> {
  const cap = request.maxResponseBytes;
  const tooLarge = () =>
    new OutboundError('too-large', `response from ${url.host} is larger than ${cap} bytes`, {
      publicMessage: `the response exceeded ${cap} bytes`,
    });
  const declared = headers['content-length'] === undefined ? Number.NaN : Number(headers['content-length']);
  if (request.onTooLarge === 'error' && declared > cap) {
    // Destroying an unread undici body emits an 'error' (RequestAbortedError) that nothing listens to yet:
    // without this listener it would be an uncaught exception in the process.
    body.on('error', () => undefined);
    body.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let kept = 0;
  let truncated = false;
  try {
    for await (const piece of body) {
      if (truncated) continue;
      const chunk = Buffer.isBuffer(piece) ? piece : Buffer.from(String(piece));
      if (kept + chunk.length > cap) {
        // Leaving the loop (break or throw) destroys the stream; the caller then destroys the connection.
        if (request.onTooLarge === 'error') throw tooLarge();
        chunks.push(chunk.subarray(0, cap - kept));
        if (!drain) return { body: Buffer.concat(chunks), truncated: true, drained: false };
        truncated = true;
        continue;
      }
      chunks.push(chunk);
      kept += chunk.length;
    }
  } catch (error) {
    // Only the dropped rest was lost: what the caller keeps of the answer is whole.
    if (truncated) return { body: Buffer.concat(chunks), truncated: true, drained: false };
    throw error;
  }
  return { body: Buffer.concat(chunks), truncated, drained: true };
}

/** `promise`, or a rejection with `signal.reason` as soon as `signal` aborts. */
export function abortable<T>(promise: Promise<T>, signal: RequestSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * undici connector that dials only the checked addresses, in order, within `timeoutMs` for all of them (each
 * gets the remaining time divided by the addresses left). A TLS failure is final (it is about the server's
 * certificate, not reachability). Used for every connection the client makes, so a reconnect of a pooled
 * client reaches only addresses the guard checked for it. `pinned.address` is set to the address connected to;
 * `secureContext` carries the trusted CAs (undefined: Node's bundled roots).
 */
export function pinnedConnector(
  url: URL,
  addresses: readonly string[],
  timeoutMs: number,
  signal: AbortSignal,
  pinned: { address: string },
  secureContext: SecureContext | undefined,
): buildConnector.connector {
  const hostname = hostnameOf(url);
  const servername = isIP(hostname) === 0 ? hostname : undefined;
  const port = url.port === '' ? 443 : Number(url.port);
  return (_options, callback) => {
    const deadline = performance.now() + timeoutMs;
    const attempt = async (): Promise<TLSSocket> => {
      let lastError: unknown;
      for (const [index, address] of addresses.entries()) {
        const left = deadline - performance.now();
        if (left <= 0 || signal.aborted) break;
        try {
          const socket = await dialTls({
            address,
            port,
            servername,
            secureContext,
            timeoutMs: left / (addresses.length - index),
            signal,
          });
          pinned.address = address;
          return socket;
        } catch (error) {
          lastError = error;
          if (toOutboundError(error, url.host).reason === 'tls') break;
        }
      }
      throw lastError ?? new OutboundError('timeout', `connecting to ${url.host} timed out`);
    };
    attempt().then(
      (socket) => callback(null, socket),
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error)), null),
    );
  };
}
