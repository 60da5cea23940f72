import type { FastifyBaseLogger } from 'fastify';
import { DomainError, errors } from '../domain/errors.ts';
import { OutboundError, type OutboundGuard } from '../net/outbound-guard.ts';
import type { MediaRule } from './kinds.ts';

/** Time allowed to fetch one media URL (DNS, connect, TLS and the whole body), milliseconds. */
export const MEDIA_FETCH_TIMEOUT_MS = 60_000;

/**
 * Where a refused or failed media fetch is logged with its details (resolved addresses, resolver codes) that
 * the API answer must not carry (docs/decisions/0020-security-promises.md): pass the request's logger so the line has
 * the request id.
 */
export type MediaFetchLog = Pick<FastifyBaseLogger, 'info'>;

/** Options of {@link fetchMedia}. */
export interface FetchMediaOptions {
  /** Time allowed for the whole fetch, milliseconds (default {@link MEDIA_FETCH_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Logger for the failure details; without one they are only attached as the DomainError's `cause`. */
  log?: MediaFetchLog;
}

/** Raw bytes of a media field, and the URL they came from (for a default file name). */
export interface MediaSource {
  data: Buffer;
  /** The `https://` URL fetched; undefined for a data URI. */
  url: URL | undefined;
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** The 413 of media over its kind's limit: `<field> must be at most <limit>` (`image must be at most 16 MB`). */
export function mediaTooLarge(field: string, rule: MediaRule): DomainError {
  return new DomainError('too_large', `${field} must be at most ${rule.maxLabel}`);
}

/**
 * Decodes a `data:[<type>][;params];base64,<data>` URI (RFC 2397). The declared type is ignored: the format is
 * decided from the bytes later (docs/decisions/0017-messages-and-media.md). Whitespace inside the data is skipped.
 * @throws DomainError invalid naming `field` when the URI is not base64 or the data is empty or malformed;
 *   too_large `<field> must be at most <limit>` when the decoded bytes exceed the rule's limit
 *   (checked before decoding).
 */
export function decodeDataUri(raw: string, field: string, rule: MediaRule): Buffer {
  const comma = raw.indexOf(',');
  if (comma < 0) throw errors.badRequest(`${field} data URI must look like data:<type>;base64,<data>`);
  const header = raw.slice(5, comma).toLowerCase();
  if (!header.split(';').includes('base64')) {
    throw errors.badRequest(`${field} data URI must be base64-encoded (data:<type>;base64,<data>)`);
  }
  const body = raw.slice(comma + 1).replace(/\s+/g, '');
  if (body.length === 0) throw errors.badRequest(`${field} is empty`);
  if (!BASE64.test(body)) throw errors.badRequest(`${field} data URI holds invalid base64`);
  const padding = body.endsWith('==') ? 2 : body.endsWith('=') ? 1 : 0;
  if (Math.floor((body.length * 3) / 4) - padding > rule.maxBytes) throw mediaTooLarge(field, rule);
  const data = Buffer.from(body, body.includes('-') || body.includes('_') ? 'base64url' : 'base64');
  if (data.length === 0) throw errors.badRequest(`${field} is empty`);
  if (data.length > rule.maxBytes) throw mediaTooLarge(field, rule);
  return data;
}

/**
 * Fetches an `https://` media URL through the outbound guard (docs/decisions/0017-messages-and-media.md,
 * docs/decisions/0020-security-promises.md): private and reserved addresses refused unless allowed, the address
 * pinned, no redirects, the body cut off as soon as it passes the limit. The answer carries only the guard's
 * caller-safe text (`OutboundError.publicMessage`): a host resolving to a refused address and a host that does not
 * resolve get the same message, so the endpoint cannot be used to map internal names
 * (docs/decisions/0020-security-promises.md). The details go to `options.log`.
 * @throws DomainError too_large `<field> must be at most <limit>`; invalid
 *   `<field> could not be fetched: <reason>` for a refused address, DNS, TLS, connection or timeout failure,
 *   a non-2xx answer (3xx included: redirects are not followed) or an empty body.
 */
export async function fetchMedia(
  guard: OutboundGuard,
  raw: string,
  field: string,
  rule: MediaRule,
  options: FetchMediaOptions = {},
): Promise<MediaSource> {
  let url: URL;
  try {
    url = guard.parseUrl(raw);
  } catch (error) {
    if (!(error instanceof OutboundError)) throw error;
    throw errors.badRequest(`${field} must be an https:// URL or a data: URI (${error.publicMessage})`);
  }
  let response: Awaited<ReturnType<OutboundGuard['request']>>;
  try {
    response = await guard.request(url, {
      method: 'GET',
      headers: { accept: '*/*', 'user-agent': 'parley-media-fetch' },
      timeoutMs: options.timeoutMs ?? MEDIA_FETCH_TIMEOUT_MS,
      maxResponseBytes: rule.maxBytes,
      onTooLarge: 'error',
    });
  } catch (error) {
    if (error instanceof OutboundError) {
      if (error.reason === 'too-large') throw mediaTooLarge(field, rule);
      options.log?.info({ err: error, reason: error.reason, field }, 'media URL fetch failed');
      throw new DomainError('invalid', `${field} could not be fetched: ${error.publicMessage}`, {
        cause: error,
      });
    }
    throw error;
  }
  if (response.status < 200 || response.status > 299) {
    const redirect = response.status >= 300 && response.status < 400 ? ' (redirects are not followed)' : '';
    throw errors.badRequest(
      `${field} could not be fetched: the server answered HTTP ${response.status}${redirect}`,
    );
  }
  if (response.body.length === 0) throw errors.badRequest(`${field} could not be fetched: the body is empty`);
  return { data: response.body, url };
}

/**
 * Reads a media field (docs/decisions/0017-messages-and-media.md): an `https://` URL (fetched) or a `data:` URI
 * (decoded). Anything else — another scheme, a local path — is refused. `log` receives the details of a failed fetch
 * (see {@link fetchMedia}); pass the request's logger.
 * @throws DomainError invalid `<field> must be an https:// URL or a data: URI`, and the errors of
 *   {@link decodeDataUri} and {@link fetchMedia}.
 */
export async function readMediaSource(
  guard: OutboundGuard,
  raw: string,
  field: string,
  rule: MediaRule,
  log?: MediaFetchLog,
): Promise<MediaSource> {
  const value = raw.trim();
  if (/^data:/i.test(value)) return { data: decodeDataUri(value, field, rule), url: undefined };
  if (/^https:\/\//i.test(value)) {
    return fetchMedia(guard, value, field, rule, log === undefined ? {} : { log });
  }
  throw errors.badRequest(`${field} must be an https:// URL or a data: URI`);
}
