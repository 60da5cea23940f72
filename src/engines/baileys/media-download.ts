import { createDecipheriv, createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { type Agent, request } from 'node:https';
import {
  DEFAULT_ORIGIN,
  getMediaKeys,
  getUrlFromDirectPath,
  type MediaType,
  normalizeMessageContent,
  type proto,
} from 'baileys';
import { DomainError, errors } from '../../domain/errors.ts';
import { parseRetryAfter } from '../../net/retry-after.ts';
import { reuploadRefused } from './media-reupload.ts';

/**
 * Downloading a platform media file again, later, from what the message said about it — what Baileys'
 * `downloadContentFromMessage` (Utils/messages-media.js) does, with two differences: the request goes through
 * Node's https with the same agent media uploads use (Baileys' `fetchAgent`, which trusts a simulator's
 * PLATFORM_CA_FILE besides the system's CAs: certificate checks stay on), and the file is verified as the
 * platform's clients verify it (the encrypted file's SHA-256, the truncated HMAC-SHA256 over IV + ciphertext,
 * the plaintext's SHA-256), which Baileys' download leaves to the caller.
 */

/** What parley keeps of a media message to fetch its file later (the message content's `download`, as JSON). */
export interface MediaReference {
  /** HKDF type of the media key (Baileys' `MediaType`: `image`, `video`, `ptv`, `audio`, `document`, `sticker`). */
  type: MediaType;
  directPath?: string;
  url?: string;
  /** Base64. */
  mediaKey: string;
  /** Base64 SHA-256 of the plaintext, when the message gave it. */
  fileSha256?: string;
  /** Base64 SHA-256 of the encrypted file (with its MAC), when the message gave it. */
  fileEncSha256?: string;
}

/** Time allowed to fetch one file (connect, TLS, whole body), ms. */
export const MEDIA_DOWNLOAD_TIMEOUT_MS = 120_000;

const MAC_BYTES = 10;

type MediaPart = proto.Message.IImageMessage & { fileEncSha256?: Uint8Array | null };

const b64 = (value: Uint8Array | null | undefined) =>
  value && value.length > 0 ? Buffer.from(value).toString('base64') : undefined;

/**
 * The download reference of a platform message's media (wrappers unwrapped as Baileys does), as the JSON text
 * stored in the message content's `download`; undefined when the message has no media or lacks the media key or
 * a direct path / URL.
 */
export function mediaReferenceOf(message: proto.IMessage | null | undefined): string | undefined {
  const content = normalizeMessageContent(message);
  if (!content) return undefined;
  const parts: [MediaType, MediaPart | null | undefined][] = [
    ['image', content.imageMessage],
    ['video', content.videoMessage],
    ['ptv', content.ptvMessage],
    ['audio', content.audioMessage],
    ['document', content.documentMessage],
    ['sticker', content.stickerMessage],
  ];
  const found = parts.find(([, part]) => part);
  if (!found) return undefined;
  const [type, part] = found;
  const mediaKey = b64(part?.mediaKey);
  if (!part || !mediaKey || (!part.directPath && !part.url)) return undefined;
  const reference: MediaReference = {
    type,
    mediaKey,
    ...(part.directPath ? { directPath: part.directPath } : {}),
    ...(part.url ? { url: part.url } : {}),
  };
  const fileSha256 = b64(part.fileSha256);
  const fileEncSha256 = b64(part.fileEncSha256);
  if (fileSha256) reference.fileSha256 = fileSha256;
  if (fileEncSha256) reference.fileEncSha256 = fileEncSha256;
  return JSON.stringify(reference);
}

/**
 * The platform's media domain: files are served from `whatsapp.net` hosts (Baileys' Utils/messages-media.js
 * `DEF_MEDIA_HOST` `mmg.whatsapp.net`, and the hosts of its `media_conn` answers such as `mmg.whatsapp.net` and
 * `media-*.cdn.whatsapp.net`), on HTTPS' default port.
 */
export const PLATFORM_MEDIA_DOMAIN = 'whatsapp.net';

/** Host names of platform simulators' media servers trusted besides the platform's (see {@link trustSimulatorMediaHost}). */
const simulatorMediaHosts = new Set<string>();

/**
 * Trusts the media server of the platform simulator at `platformUrl` (`PLATFORM_URL`, docs/decisions/0007-simulator.md):
 * its host name, on any port (the simulator's media server listens on the host of its WebSocket, on a port of its
 * own). Process-wide, as the simulator's Noise root is (platform.ts `trustPlatformRoot`); never called in production.
 * @throws TypeError when `platformUrl` is not a URL.
 */
export function trustSimulatorMediaHost(platformUrl: string): void {
  simulatorMediaHosts.add(new URL(platformUrl).hostname);
}

/**
 * Whether `url` is on a host parley downloads platform media from: HTTPS, and either a `whatsapp.net` host
 * ({@link PLATFORM_MEDIA_DOMAIN}) on the default port, or a trusted simulator's host
 * ({@link trustSimulatorMediaHost}). Received media references and re-upload answers come from other people
 * (a sender holds the media key, so can seal any answer): without this rule a message could make parley fetch
 * any URL, an internal address included (docs/decisions/0046-media-re-upload.md).
 */
export function isPlatformMediaUrl(url: URL): boolean {
  if (url.protocol !== 'https:' || url.username !== '' || url.password !== '') return false;
  if (simulatorMediaHosts.has(url.hostname)) return true;
  const host = url.hostname.toLowerCase();
  return (host === PLATFORM_MEDIA_DOMAIN || host.endsWith(`.${PLATFORM_MEDIA_DOMAIN}`)) && url.port === '';
}

/**
 * A direct path as the platform writes them (`/v/t62.7118-24/…_n.enc?ccb=11-4&oh=…&oe=…`): starts with one `/`
 * (not `//`, which would name another host) and has only URL path and query characters, so that Baileys'
 * `getUrlFromDirectPath` (`https://${host}${directPath}`) cannot be made to name another host (`@127.0.0.1/…`
 * makes the host a user name, `.evil.example/…` extends it).
 */
const DIRECT_PATH = /^\/(?!\/)[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*$/;

/** Whether `directPath` is a plain absolute path ({@link DIRECT_PATH}). */
export function isPlainDirectPath(directPath: string): boolean {
  return DIRECT_PATH.test(directPath);
}

/** The host Baileys downloads a reference from: the host of its URL, else Baileys' `DEF_MEDIA_HOST`. */
function hostOf(reference: MediaReference): string | undefined {
  try {
    return reference.url ? new URL(reference.url).host : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The URL Baileys downloads from (Utils/messages-media.js `downloadContentFromMessage`): the direct path on the
 * host of the message's URL (else its default host), else the URL.
 * @throws Error naming the rule when the direct path is not plain or the URL is not on a platform media host.
 */
function downloadUrl(reference: MediaReference): URL {
  if (reference.directPath !== undefined && !isPlainDirectPath(reference.directPath))
    throw new Error('its direct path is not a plain path');
  const raw = reference.directPath
    ? getUrlFromDirectPath(reference.directPath, hostOf(reference))
    : (reference.url ?? '');
  const url = new URL(raw);
  if (!isPlatformMediaUrl(url))
    throw new Error(`its link is not on the platform's media hosts (${url.host})`);
  return url;
}

/**
 * The media host answered that it no longer has the file (HTTP 403, 404 or 410 in `hostStatus`): an expired or
 * deleted link. A `gone` DomainError; the session may ask the sender's phone to upload the file again
 * (media-reupload.ts) when the status is one Baileys re-uploads for.
 */
export class MediaLinkGone extends DomainError {
  /** The media host's HTTP status. */
  readonly hostStatus: number;

  constructor(messageId: string, hostStatus: number) {
    super(
      'gone',
      `the platform no longer has the media of message ${messageId}: its media links expire after a while (the host answered HTTP ${hostStatus}), and parley had not kept a copy`,
    );
    this.hostStatus = hostStatus;
  }
}

/** A stored `download` text read back, or undefined when it is not one {@link mediaReferenceOf} wrote. */
export function parseMediaReference(reference: string): MediaReference | undefined {
  try {
    const parsed = JSON.parse(reference) as MediaReference;
    return typeof parsed.mediaKey === 'string' && typeof parsed.type === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The `download` text of `reference` moved to a new direct path (a re-upload's answer): `directPath` replaced,
 * `url` rebuilt on the same host with Baileys' `getUrlFromDirectPath` (Socket/messages-send.js
 * `updateMediaMessage` does the same to the message). Keys and hashes are unchanged: the phone uploads the same
 * encrypted file. The answer comes from the sender's phone, so it must be a plain path
 * ({@link isPlainDirectPath}) whose URL stays on the original media's host (host name and port) and on a
 * platform media host ({@link isPlatformMediaUrl}).
 * @throws DomainError gone (the re-upload failed) naming the rule the answer breaks.
 */
export function movedMediaReference(
  reference: MediaReference,
  directPath: string,
  messageId: string,
): string {
  const host = hostOf(reference);
  const expected = new URL(getUrlFromDirectPath('/', host));
  const refuse = (why: string) =>
    reuploadRefused(
      messageId,
      `its answer named a direct path that ${why} (${JSON.stringify(directPath.slice(0, 80))})`,
    );
  if (!isPlainDirectPath(directPath)) throw refuse('is not a plain path');
  const raw = getUrlFromDirectPath(directPath, host);
  const url = new URL(raw);
  if (url.hostname !== expected.hostname || url.port !== expected.port)
    throw refuse(`leaves the media host ${expected.host}`);
  if (!isPlatformMediaUrl(url)) throw refuse(`is on ${url.host}, not a platform media host`);
  return JSON.stringify({ ...reference, directPath, url: raw });
}

/**
 * Opens the HTTPS response of `url` (status checked by the caller). `deadline` aborts the whole exchange, body
 * included: the request is destroyed with its reason, which ends the response's stream too.
 */
function get(url: URL, agent: Agent | undefined, deadline: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'GET',
      headers: { Origin: DEFAULT_ORIGIN },
      ...(agent ? { agent } : {}),
    });
    const abort = () => req.destroy(deadline.reason instanceof Error ? deadline.reason : undefined);
    if (deadline.aborted) abort();
    else deadline.addEventListener('abort', abort, { once: true });
    req.on('close', () => deadline.removeEventListener('abort', abort));
    req.on('response', resolve);
    req.on('error', reject);
    req.end();
  });
}

/** The media host could not be reached, or its answer broke off or outlasted the time allowed: 503. */
function unreachable(error: unknown, deadline: AbortSignal): DomainError {
  const cause = deadline.aborted ? deadline.reason : error;
  return new DomainError(
    'platform_unreachable',
    `the platform's media host could not be reached: ${cause instanceof Error ? cause.message : String(cause)}`,
    { cause },
  );
}

/**
 * The media host answered HTTP 5xx (`status`): a fault of the host (overloaded, restarting, a gateway in front of it
 * failing; RFC 9110 section 15.6: the server failed to fulfil an apparently valid request), not a refusal of the
 * file, so it is answered as the host unreachable (503) and the client retries. A 4xx says the request itself is
 * refused and stays `platform_refused` (403, 404 and 410 are {@link MediaLinkGone}).
 */
function hostFault(status: number): DomainError {
  return new DomainError(
    'platform_unreachable',
    `the platform's media host could not serve the file right now (it answered HTTP ${status}); retry shortly`,
  );
}

/** The wait a media host's 429 asks for when it names none, and the longest one passed on to the client, seconds. */
export const MEDIA_HOST_RETRY_AFTER_S = { default: 5, max: 3_600 } as const;

/**
 * The media host answered HTTP 429 Too Many Requests (RFC 6585 §4): it limits how fast this address fetches, for a
 * while; the file is not refused, so it is answered as the host unreachable (503) with `Retry-After`: the host's own
 * `Retry-After` header (RFC 9110 §10.2.3, seconds or a date; rounded up to whole seconds, 1 to
 * {@link MEDIA_HOST_RETRY_AFTER_S}.max) or, without a usable one, {@link MEDIA_HOST_RETRY_AFTER_S}.default.
 */
function hostBusy(retryAfter: string | undefined): DomainError {
  const asked = parseRetryAfter(retryAfter, Date.now());
  const seconds =
    asked === undefined
      ? MEDIA_HOST_RETRY_AFTER_S.default
      : Math.min(MEDIA_HOST_RETRY_AFTER_S.max, Math.max(1, Math.ceil(asked / 1000)));
  return new DomainError(
    'platform_unreachable',
    `the platform's media host is limiting requests right now (it answered HTTP 429); retry in ${seconds} s`,
    { retryAfter: seconds },
  );
}

/**
 * Fetches and decrypts the file `reference` (a `download` text written by {@link mediaReferenceOf}) names.
 * The returned iterable yields plaintext as it arrives and throws at the end when a check fails; a consumer
 * keeps nothing until it completes.
 * @param maxBytes the largest plaintext accepted.
 * @throws MediaLinkGone (DomainError gone) when the media host answers 403, 404 or 410 (expired or deleted links);
 *   platform_unreachable when the host cannot be reached (DNS, TLS, connection, timeout), answers a 5xx (a
 *   transient fault of the host) or a 429 (with `retryAfter`, {@link hostBusy}); platform_refused for another answer
 *   (another 4xx, an unexpected status) or a
 *   file failing its checks; too_large over `maxBytes`.
 */
export async function downloadPlatformMedia(
  reference: string,
  messageId: string,
  maxBytes: number,
  agent: Agent | undefined,
  timeoutMs = MEDIA_DOWNLOAD_TIMEOUT_MS,
): Promise<AsyncIterable<Buffer>> {
  const parsed = parseMediaReference(reference);
  let url: URL;
  try {
    if (!parsed) throw new Error('not a media reference');
    url = downloadUrl(parsed);
  } catch (error) {
    const why = parsed ? `: ${(error as Error).message}` : '';
    throw errors.notFound(`message ${messageId} has no downloadable media${why}`);
  }
  const keys = await getMediaKeys(Buffer.from(parsed.mediaKey, 'base64'), parsed.type);
  const iv = Buffer.from(keys.iv);
  const cipherKey = Buffer.from(keys.cipherKey);
  const macKey = Buffer.from(keys.macKey ?? []);
  // The time allowed covers the whole download, body included (a trickling host is cut off at it).
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new Error(`no whole answer within ${timeoutMs} ms`)),
    timeoutMs,
  );
  timer.unref();
  let response: IncomingMessage;
  try {
    response = await get(url, agent, deadline.signal);
  } catch (error) {
    clearTimeout(timer);
    throw unreachable(error, deadline.signal);
  }
  const status = response.statusCode ?? 0;
  if (status !== 200) {
    clearTimeout(timer);
    response.resume();
    if (status === 403 || status === 404 || status === 410) throw new MediaLinkGone(messageId, status);
    if (status >= 500 && status <= 599) throw hostFault(status);
    if (status === 429) {
      const header = response.headers['retry-after'];
      throw hostBusy(Array.isArray(header) ? header[0] : header);
    }
    throw new DomainError('platform_refused', `the platform's media host answered HTTP ${status}`);
  }
  const tooLarge = () =>
    new DomainError('too_large', `media of message ${messageId} is larger than ${maxBytes} bytes`);
  const declared = Number(response.headers['content-length'] ?? Number.NaN);
  if (declared > maxBytes + MAC_BYTES + 16) {
    clearTimeout(timer);
    response.destroy();
    throw tooLarge();
  }
  return decrypt(
    streamed(response, deadline.signal, () => clearTimeout(timer)),
    { iv, cipherKey, macKey },
    parsed,
    messageId,
    maxBytes,
    tooLarge,
  );
}

/**
 * The chunks of `body`; a stream that breaks off (the host reset the connection, the deadline passed) ends in a
 * DomainError platform_unreachable instead of the socket's own error. `done` runs once the body ended either way.
 */
async function* streamed(
  body: IncomingMessage,
  deadline: AbortSignal,
  done: () => void,
): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of body) yield chunk as Buffer;
  } catch (error) {
    throw unreachable(error, deadline);
  } finally {
    done();
    body.destroy();
  }
}

/** Decrypts the encrypted file as it streams in, checking the MAC and both hashes at the end. */
async function* decrypt(
  body: AsyncIterable<Buffer>,
  keys: { iv: Buffer; cipherKey: Buffer; macKey: Buffer },
  reference: MediaReference,
  messageId: string,
  maxBytes: number,
  tooLarge: () => DomainError,
): AsyncGenerator<Buffer> {
  const refused = (what: string) =>
    new DomainError('platform_refused', `the media of message ${messageId} failed its check: ${what}`);
  const encHash = createHash('sha256');
  const plainHash = createHash('sha256');
  const mac = createHmac('sha256', keys.macKey).update(keys.iv);
  const decipher = createDecipheriv('aes-256-cbc', keys.cipherKey, keys.iv);
  let tail: Buffer = Buffer.alloc(0);
  let plain = 0;
  const emit = (chunk: Buffer): Buffer => {
    plain += chunk.length;
    if (plain > maxBytes) throw tooLarge();
    plainHash.update(chunk);
    return chunk;
  };
  for await (const chunk of body) {
    encHash.update(chunk);
    const data = tail.length === 0 ? chunk : Buffer.concat([tail, chunk]);
    const cut = Math.max(0, data.length - MAC_BYTES);
    tail = data.subarray(cut);
    const cipher = data.subarray(0, cut);
    if (cipher.length === 0) continue;
    mac.update(cipher);
    const out = decipher.update(cipher);
    if (out.length > 0) yield emit(out);
  }
  if (tail.length !== MAC_BYTES) throw refused('the file is shorter than its MAC');
  if (!timingSafeEqual(mac.digest().subarray(0, MAC_BYTES), tail)) throw refused('MAC mismatch');
  if (reference.fileEncSha256 && encHash.digest('base64') !== reference.fileEncSha256)
    throw refused('SHA-256 of the encrypted file mismatch');
  let last: Buffer;
  try {
    last = decipher.final();
  } catch {
    throw refused('bad padding');
  }
  if (last.length > 0) yield emit(last);
  if (reference.fileSha256 && plainHash.digest('base64') !== reference.fileSha256)
    throw refused('SHA-256 of the file mismatch');
}
