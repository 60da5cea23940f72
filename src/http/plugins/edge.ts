import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import pino from 'pino';
import { DomainError } from '../../domain/errors.ts';
import { statusOf } from '../errors.ts';
import { callbackHook } from '../hook-style.ts';
import { redactUrl } from '../log-redaction.ts';
import { errorBody } from './errors.ts';

/**
 * Longest request URL (path and query) served, bytes: 8 KB, the common limit of proxies (nginx's default
 * `large_client_header_buffers`); longer ones are 414 (docs/api.md "Errors", docs/decisions/0015-edge-hardening.md).
 */
export const MAX_URL_BYTES = 8 * 1024;

/** `Strict-Transport-Security` sent when `PUBLIC_URL` is https (one year; RFC 6797). */
export const HSTS = 'max-age=31536000';

/** Paths whose pages must never be framed (clickjacking): the API reference and the dashboard. */
const UNFRAMED = /^\/(docs|dashboard)(\/|\?|$)/;

/** Whether `log` writes lines of `level` (pino's level values; `silent` writes nothing). */
function writes(log: FastifyBaseLogger, level: 'debug' | 'info'): boolean {
  if (log.level === 'silent') return false;
  const values = pino.levels.values;
  return (values[log.level] ?? 0) <= (values[level] ?? 0);
}

function headerOf(reply: FastifyReply, name: string): unknown {
  return reply.getHeader(name) ?? reply.raw.getHeader(name);
}

/**
 * The server's edge rules, on every request of the app (docs/decisions/0015-edge-hardening.md):
 *
 * - an HTTP/1.1 request without `Host` is 400 `Host header is required` in the envelope (RFC 9112 §3.2; Node's
 *   own refusal, a bare 400, is switched off in src/http/app.ts so this one answers);
 * - a URL over {@link MAX_URL_BYTES} is 414 `URI too long` (longer than Node's header limit, the parser's refusal
 *   is turned into the same 414 by src/http/client-errors.ts);
 * - every response carries `X-Content-Type-Options: nosniff`; `/docs` and `/dashboard` also
 *   `X-Frame-Options: DENY` and a CSP `frame-ancestors 'none'` (unless the page set a fuller CSP); with an https
 *   `publicUrl`, `Strict-Transport-Security: max-age=31536000` (docs/deploy.md "HTTPS");
 * - one log line per request at `info`, when the response is sent: method, URL (secrets redacted,
 *   src/http/log-redaction.ts), status, duration in ms, request id (Fastify's own two lines are switched off);
 *   at `debug` also an `incoming request` line when it arrives (a request that never finishes shows there).
 */
export const edgePlugin = fp(
  async (app: FastifyInstance, options: { publicUrl: string }) => {
    const hsts = options.publicUrl.startsWith('https:');
    // The hooks here run on every request and never wait: callback style, no promise each (src/http/hook-style.ts).
    app.addHook(
      'onRequest',
      callbackHook((request: FastifyRequest, reply: FastifyReply) => {
        const raw = request.raw;
        if (writes(request.log, 'debug'))
          request.log.debug({ method: request.method, url: logged(request.url) }, 'incoming request');
        if (raw.httpVersion === '1.1' && raw.headers.host === undefined)
          throw new DomainError('invalid', 'Host header is required');
        if (Buffer.byteLength(raw.url ?? '') > MAX_URL_BYTES)
          return reply.code(statusOf('uri_too_long')).send(errorBody(414, URI_TOO_LONG));
        return undefined;
      }),
    );
    app.addHook('onSend', (request, reply, payload, done) => {
      reply.header('x-content-type-options', 'nosniff');
      if (hsts) reply.header('strict-transport-security', HSTS);
      if (UNFRAMED.test(request.url)) {
        reply.header('x-frame-options', 'DENY');
        if (headerOf(reply, 'content-security-policy') === undefined)
          reply.header('content-security-policy', "frame-ancestors 'none'");
      }
      done(null, payload);
    });
    app.addHook('onResponse', (request, reply, done) => {
      // The line's fields (the redacted URL above all) are built only when it is written.
      if (writes(request.log, 'info')) {
        request.log.info(
          {
            method: request.method,
            url: logged(request.url),
            status: reply.statusCode,
            ms: Math.round(reply.elapsedTime * 10) / 10,
          },
          'request',
        );
      }
      done();
    });
  },
  { name: 'parley-edge' },
);

/** The message of a 414 for a URL over {@link MAX_URL_BYTES}. */
export const URI_TOO_LONG = `URI too long: the URL must be at most ${MAX_URL_BYTES / 1024} KB`;

/** The URL as logged: secrets redacted, cut to 2 KB (a refused 8 KB+ URL need not be written whole). */
function logged(url: string): string {
  const redacted = redactUrl(url);
  return redacted.length > 2048 ? `${redacted.slice(0, 2048)}…` : redacted;
}
