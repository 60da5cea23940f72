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

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

/**
 * `url` with the value of every secret-looking query parameter replaced by `[REDACTED]` (the name is kept, so
 * the log still says what was sent); the path and the other parameters are unchanged. A URL without a query is
 * returned as is.
 */
export function redactUrl(url: string): string {
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
