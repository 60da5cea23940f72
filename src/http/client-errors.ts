import { randomUUID } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorCode, statusOf } from './errors.ts';
import { MAX_URL_BYTES, URI_TOO_LONG } from './plugins/edge.ts';
import { errorBody } from './plugins/errors.ts';

/** What Node passes to the server's `'clientError'` event: the parser error, with llhttp's code and the chunk. */
interface ParserError extends Error {
  code?: string;
  /** The bytes the parser was reading when it refused them. */
  rawPacket?: unknown;
}

/**
 * Whether a header overflow happened inside the request line: the chunk being parsed starts a request
 * (`METHOD SP`) and its first line is longer than {@link MAX_URL_BYTES}, or does not end in it. A URL sent in many
 * small pieces overflows in a chunk that does not start the request: that stays a 431.
 */
function requestLineOverflow(error: ParserError): boolean {
  const packet = error.rawPacket;
  if (!Buffer.isBuffer(packet) || !/^[A-Z]+ /.test(packet.subarray(0, 16).toString('latin1'))) return false;
  const lineEnd = packet.indexOf('\r\n');
  return lineEnd === -1 || lineEnd > MAX_URL_BYTES;
}

/**
 * Our code and message for one HTTP parser error (llhttp's `HPE_*` codes, Node's `ERR_HTTP_REQUEST_TIMEOUT`).
 * The messages say what was wrong with the request without echoing any of it back.
 */
function parserErrorOf(error: ParserError): { code: ErrorCode; message: string } {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      if (requestLineOverflow(error)) return { code: 'uri_too_long', message: URI_TOO_LONG };
      return {
        code: 'headers_too_large',
        message: `request line and headers must be at most ${Math.floor(maxHeaderSize / 1024)} KB`,
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: 'request_timeout', message: 'request was not received in time' };
    case 'HPE_INVALID_METHOD':
      return { code: 'invalid', message: 'request line has an invalid method' };
    case 'HPE_INVALID_URL':
      return { code: 'invalid', message: 'request line has an invalid URL' };
    case 'HPE_INVALID_VERSION':
      return { code: 'invalid', message: 'request line has an invalid HTTP version' };
    case 'HPE_INVALID_HEADER_TOKEN':
      return {
        code: 'invalid',
        message: 'a request header has an invalid character in its name or value',
      };
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return { code: 'invalid', message: 'Content-Length header is invalid' };
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_INVALID_CHUNK_SIZE':
      return { code: 'invalid', message: 'chunked request body is malformed' };
    case 'HPE_CR_EXPECTED':
    case 'HPE_LF_EXPECTED':
    case 'HPE_STRICT':
      return { code: 'invalid', message: 'request is not valid HTTP/1.1: lines must end with CRLF' };
    default:
      return { code: 'invalid', message: 'request is not valid HTTP/1.1' };
  }
}

/** The socket's response in progress, if any (`_httpMessage` is how Node's own `'clientError'` default checks it). */
function responseInProgress(socket: Socket): boolean {
  const message = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  return message?.headersSent === true;
}

/**
 * Fastify's `clientErrorHandler` (Node's `'clientError'` event): a request the HTTP parser refused (bad request
 * line, bad header byte, a request line over {@link MAX_URL_BYTES} (414), headers over Node's `maxHeaderSize`
 * (431), request timeout) gets parley's envelope with a
 * fresh `x-request-id` (the request's own header could not be read), then the connection is closed, as HTTP/1.1
 * requires after a framing error (RFC 9112 §2.2). Nothing is written when a response is already under way on the
 * socket (that would corrupt it) or when the peer is gone (ECONNRESET). Logged at debug with the request id: a
 * client's mistake, not the server's.
 */
export function clientErrorHandler(logger: FastifyBaseLogger) {
  return (error: ParserError, socket: Socket): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const { code, message } = parserErrorOf(error);
    const status = statusOf(code);
    const requestId = randomUUID();
    logger.debug({ reqId: requestId, err: { code: error.code, message: error.message } }, 'client error');
    if (!socket.writable || responseInProgress(socket)) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify(errorBody(status, message));
    socket.end(
      [
        `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
        'content-type: application/json; charset=utf-8',
        'x-content-type-options: nosniff',
        `content-length: ${Buffer.byteLength(body)}`,
        `x-request-id: ${requestId}`,
        'connection: close',
        '',
        body,
      ].join('\r\n'),
      () => socket.destroy(),
    );
  };
}

/**
 * Fastify's `frameworkErrors` option: errors the router raises before any route runs, answered with parley's
 * envelope and the request's `x-request-id`, never echoing the path back. A path parameter over Fastify's
 * `maxParamLength` (100 characters) is 414; a path with broken percent-encoding is 400.
 */
export function frameworkErrorHandler(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  let mapped: { code: ErrorCode; message: string };
  switch (error.code) {
    case 'FST_ERR_MAX_PARAM_LENGTH':
      mapped = { code: 'uri_too_long', message: 'a path parameter is longer than 100 characters' };
      break;
    case 'FST_ERR_BAD_URL':
      mapped = { code: 'invalid', message: 'request path has invalid percent-encoding' };
      break;
    default:
      request.log.error({ err: error }, 'router error');
      mapped = { code: 'internal', message: 'internal error' };
  }
  const status = statusOf(mapped.code);
  reply.header('x-request-id', request.id).code(status).send(errorBody(status, mapped.message));
}
