/**
 * Why an outbound request (webhook delivery, media fetch) failed (DESIGN D10, D11):
 * - `invalid-url`: not a parseable URL, has userinfo, no host, too long
 * - `scheme`: not `https:`
 * - `blocked-address`: the URL's address, or one its host resolves to, is in a refused range (D11)
 * - `dns`: the host does not resolve
 * - `timeout`: the total time allowed passed (lookup, connect, TLS, headers or body)
 * - `too-large`: the response body passed the cap (error mode)
 * - `connect`: the TCP connection failed or broke (refused, reset, unreachable)
 * - `tls`: handshake or certificate verification failed
 * - `protocol`: the server's answer was not valid HTTP/1.1
 */
export type OutboundFailure =
  | 'invalid-url'
  | 'scheme'
  | 'blocked-address'
  | 'dns'
  | 'timeout'
  | 'too-large'
  | 'connect'
  | 'tls'
  | 'protocol';

/**
 * An outbound request refused or failed. `message` is user-presentable (it may be shown in an API error or
 * stored in the webhook delivery log): it names the host or address and the rule, never internals, e.g.
 * `address 127.0.0.1 is not allowed (loopback)`. The underlying error, if any, is in `cause`.
 */
export class OutboundError extends Error {
  override name = 'OutboundError';
  readonly reason: OutboundFailure;

  constructor(reason: OutboundFailure, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
  }
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

const PROTOCOL_CODES = new Set([
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'UND_ERR_HEADERS_OVERFLOW',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_INFO',
]);

/** OpenSSL certificate verification codes (X509_V_ERR_* without the prefix) and Node's TLS codes. */
function isTlsCode(code: string): boolean {
  return (
    code.startsWith('ERR_TLS_') ||
    code.startsWith('ERR_SSL_') ||
    /CERT|SELF_SIGNED|UNABLE_TO_|HOSTNAME_MISMATCH|INVALID_CA|PATH_LENGTH|INVALID_PURPOSE/.test(code)
  );
}

function describe(error: unknown): { code: string | undefined; message: string } {
  if (typeof error !== 'object' || error === null) return { code: undefined, message: String(error) };
  const code = 'code' in error && typeof error.code === 'string' ? error.code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return { code, message };
}

/**
 * Maps an error raised while talking to `host` (undici, `node:tls`, `node:net`) to an {@link OutboundError}
 * with a user-presentable message. An OutboundError is returned unchanged. Unknown errors become `connect`.
 */
export function toOutboundError(error: unknown, host: string): OutboundError {
  if (error instanceof OutboundError) return error;
  const { code, message } = describe(error);
  const options = { cause: error };
  if (code !== undefined) {
    if (TIMEOUT_CODES.has(code)) return new OutboundError('timeout', `request to ${host} timed out`, options);
    if (isTlsCode(code)) {
      return new OutboundError('tls', `TLS with ${host} failed: ${message} (${code})`, options);
    }
    if (code.startsWith('HPE_') || PROTOCOL_CODES.has(code)) {
      return new OutboundError('protocol', `${host} sent an invalid HTTP response (${code})`, options);
    }
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ENODATA') {
      return new OutboundError('dns', `host ${host} could not be resolved (${code})`, options);
    }
    return new OutboundError('connect', `connection to ${host} failed (${code})`, options);
  }
  if (error instanceof Error && error.name === 'HTTPParserError') {
    return new OutboundError('protocol', `${host} sent an invalid HTTP response`, options);
  }
  if (typeof error === 'object' && error !== null && 'library' in error) {
    return new OutboundError('tls', `TLS with ${host} failed: ${message}`, options);
  }
  return new OutboundError('connect', `connection to ${host} failed`, options);
}
