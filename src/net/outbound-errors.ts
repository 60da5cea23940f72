/**
 * Why an outbound request (webhook delivery, media fetch) failed (docs/decisions/0005-outbox-and-delivery.md,
 * docs/decisions/0020-security-promises.md):
 * - `invalid-url`: not a parseable URL, has userinfo, no host, too long
 * - `scheme`: not `https:`
 * - `blocked-address`: the URL's address, or one its host resolves to, is in a refused range
 * (docs/decisions/0020-security-promises.md)
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
 * The one caller-facing text for `blocked-address` and `dns` (docs/decisions/0020-security-promises.md): the same
 * words whether the host resolves to a refused address or does not resolve at all, so an API caller cannot use the
 * webhook or media endpoints to map internal host names to private addresses.
 */
export const NOT_PUBLIC_HOST = 'the host does not resolve to an allowed public address';

/** Caller-facing text of each reason that carries no caller-specific detail (see {@link OutboundError}). */
const PUBLIC_TEXT: Record<OutboundFailure, string> = {
  'invalid-url': 'the URL is not valid',
  scheme: 'the URL must use https',
  'blocked-address': NOT_PUBLIC_HOST,
  dns: NOT_PUBLIC_HOST,
  timeout: 'the request timed out',
  'too-large': 'the response was too large',
  connect: 'the connection failed',
  tls: 'the TLS handshake failed',
  protocol: 'the server sent an invalid HTTP response',
};

/**
 * An outbound request refused or failed (docs/decisions/0020-security-promises.md).
 *
 * - `message` is the detailed text for **server logs only**: it names the host, the addresses it resolved to,
 *   the refused range and resolver or socket error codes, e.g.
 *   `host localhost resolves to 127.0.0.1, which is not allowed (loopback)`. Never send it to an API caller or
 *   store it where a tenant can read it.
 * - {@link publicMessage} is the caller-safe text for API answers and the webhook delivery log: never an
 *   address, an address class or a resolver code; `blocked-address` and `dns` share one wording
 *   ({@link NOT_PUBLIC_HOST}) so "resolves to a private address" and "does not resolve" look the same.
 *
 * The underlying error, if any, is in `cause`.
 */
export class OutboundError extends Error {
  override name = 'OutboundError';
  readonly reason: OutboundFailure;
  readonly #publicDetail: string | undefined;

  /**
   * @param message detailed text for server logs.
   * @param options.cause the underlying error; `options.publicMessage` a caller-safe text that replaces the
   *   reason's generic one. It must be derived only from what the caller sent or from parley's own limits
   *   (e.g. `the response exceeded 1024 bytes`); it is ignored for `blocked-address` and `dns`.
   */
  constructor(
    reason: OutboundFailure,
    message: string,
    options?: { cause?: unknown; publicMessage?: string },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
    this.#publicDetail = options?.publicMessage;
  }

  /** Caller-safe text (API answers, delivery log): see the class doc. */
  get publicMessage(): string {
    if (this.reason === 'blocked-address' || this.reason === 'dns') return NOT_PUBLIC_HOST;
    return this.#publicDetail ?? PUBLIC_TEXT[this.reason];
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
 * whose `message` carries the details for the server log (host, error code) and whose `publicMessage` is the
 * reason's generic caller-safe text. An OutboundError is returned unchanged. Unknown errors become `connect`.
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
