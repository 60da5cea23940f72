import type { FastifyRequest } from 'fastify';

/** The value logged in place of a secret. */
export const REDACTED = '[REDACTED]';

/**
 * Query parameter names whose values are secrets: API keys, tokens, passwords, signatures, HMAC keys, session
 * ids, in any spelling (`api_key`, `apiKey`, `X-Api-Key`, `access_token`, `client_secret`, `sig`…). Matched on
 * the decoded name, case-insensitively, anywhere in it (docs/decisions/0020-security-promises.md: keys are never
 * logged).
 */
const SECRET_NAME =
  /key|token|secret|signature|(^|[_.-])sig($|[_.-])|passw|pwd|auth|credential|session|cookie|hmac|bearer/i;

/**
 * Secrets recognised by their shape wherever they appear (docs/decisions/0015-edge-hardening.md): parley API keys
 * (`svc_live_…`, `svc_test_…`, docs/api.md "Keys"), webhook signing secrets (`whsec_…`), the credential of an
 * `Authorization: Bearer …` / `Basic …` value, and the value given to an `hmacKey` / `hmac_key` field or parameter
 * (JSON with or without escaped quotes, or `name=value`).
 */
const SECRET_SHAPES: [RegExp, string][] = [
  [/svc_(?:live|test)_[A-Za-z0-9_-]+/g, REDACTED],
  [/whsec_[A-Za-z0-9+/=_%-]+/g, REDACTED],
  [/\b(Bearer|Basic)(\s+|%20|\+)[A-Za-z0-9._~+/=%-]{8,}/gi, `$1$2${REDACTED}`],
  [/(hmac_?key"\s*:\s*")[^"]*/gi, `$1${REDACTED}`],
  [/(hmac_?key\\"\s*:\s*\\")(?:(?!\\").)*/gi, `$1${REDACTED}`],
  [/(hmac_?key=)[^&\s"]+/gi, `$1${REDACTED}`],
];

/**
 * `text` with every secret recognised by its shape ({@link SECRET_SHAPES}) replaced by `[REDACTED]`, whatever the
 * name it was given under; the rest unchanged. Used on URLs and on every log line the server writes.
 */
export function redactSecrets(text: string): string {
  let out = text;
  for (const [shape, replacement] of SECRET_SHAPES) out = out.replace(shape, replacement);
  return out;
}

/**
 * pino options that pass every serialized log line through {@link redactSecrets} before it is written, so a
 * secret reaching a log line by any path (an error message, a header, a URL) is not written (the rule
 * in docs/decisions/0015-edge-hardening.md: keys and secrets are never logged).
 */
export const REDACTING_LOGGER_OPTIONS = {
  hooks: { streamWrite: redactSecrets },
} as const;

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

/**
 * `url` with the value of every secret-looking query parameter replaced by `[REDACTED]` (the name is kept, so
 * the log still says what was sent) and every secret recognised by its shape ({@link redactSecrets}) replaced,
 * in the path or under any parameter name; the rest is unchanged.
 */
export function redactUrl(url: string): string {
  return redactSecrets(redactQueryNames(url));
}

function redactQueryNames(url: string): string {
  const queryAt = url.indexOf('?');
  if (queryAt === -1) return url;
  const hashAt = url.indexOf('#', queryAt);
  const query = url.slice(queryAt + 1, hashAt === -1 ? undefined : hashAt);
  const redacted = query
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals === -1 ? pair : pair.slice(0, equals);
      return SECRET_NAME.test(decodedName(name)) ? `${name}=${REDACTED}` : pair;
    })
    .join('&');
  return `${url.slice(0, queryAt)}?${redacted}${hashAt === -1 ? '' : url.slice(hashAt)}`;
}

/**
 * The pino `req` serializer of the HTTP app: Fastify's own fields (method, url, host, remote address and port)
 * with the URL's secret query values redacted. Headers are not logged (they carry `Authorization`).
 */
export function requestSerializer(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: redactUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
