/**
 * The simulator's media server: an HTTPS server (its own certificate, media/tls.ts) that takes encrypted
 * uploads and serves them by direct path, as the platform's media hosts do for Baileys
 * (Utils/messages-media.js `getWAUploadToServer`, `downloadContentFromMessage`):
 * - `POST /mms/{image|video|audio|document}/<hash>?auth=<token>&token=<hash>`: the body is the encrypted file;
 *   `<hash>` is its SHA-256 in base64url without padding. The token must be one the server handed out in a
 *   `media_conn` answer and not expired (401 otherwise); the body's hash must equal `<hash>` (400 otherwise);
 *   bodies over {@link MAX_UPLOAD_BYTES} get 413. Answers `{ url, direct_path }` (JSON).
 * - `GET <direct path>`: the stored file (`application/octet-stream`); 404 for an unknown path, 403 when the
 *   path's `oh` signature is wrong or its `oe` expiry passed.
 * Errors are JSON `{ "error": "…" }` naming the rule.
 */
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, request as httpsRequest, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { BinaryNode } from 'baileys';
import type { Logger } from 'pino';
import { sha256, uploadToken } from './crypto.ts';
import type { MediaTls } from './tls.ts';

/** Largest accepted upload, bytes (a 100 MB document, encrypted, plus margin); announced in `media_conn`. */
export const MAX_UPLOAD_BYTES = 110 * 1024 * 1024;

/** How long a `media_conn` auth token is valid, seconds (announced as `ttl`). */
export const AUTH_TTL_SECONDS = 3600;

/** How long a direct path can be downloaded, seconds (its `oe`). */
export const URL_TTL_SECONDS = 14 * 86_400;

const UPLOAD_KINDS = new Set(['image', 'video', 'audio', 'document']);

/** A stored encrypted file. */
export interface StoredMedia {
  /** Upload path kind: `image` (stickers too), `video`, `audio`, `document`. */
  kind: string;
  /** The encrypted file as uploaded. */
  file: Buffer;
  /** Path part of the direct path (`/v/t62.7118-24/…_n.enc`). */
  path: string;
  /** The direct path with its query (`?ccb=11-4&oh=…&oe=…`), as messages carry it. */
  directPath: string;
  /** `https://<host><directPath>&mms3=true`, as messages carry it. */
  url: string;
}

/** Answer of a `media_conn` query: one host, an auth token and its lifetime. */
export interface MediaConn {
  /** `127.0.0.1:<port>`: Baileys puts it after `https://`. */
  hostname: string;
  auth: string;
  ttlSeconds: number;
  maxContentLengthBytes: number;
}

/**
 * The `<media_conn auth ttl auth_ttl max_buckets><host hostname maxContentLengthBytes/></media_conn>` answer to
 * an iq `w:m`, as Baileys' Socket/messages-send.js refreshMediaConn reads it (uploads then go to
 * `https://<hostname><path>?auth=…`).
 */
export function mediaConnNode(conn: MediaConn): BinaryNode {
  return {
    tag: 'media_conn',
    attrs: {
      auth: conn.auth,
      ttl: String(conn.ttlSeconds),
      auth_ttl: String(conn.ttlSeconds),
      max_buckets: '12',
    },
    content: [
      {
        tag: 'host',
        attrs: { hostname: conn.hostname, maxContentLengthBytes: String(conn.maxContentLengthBytes) },
      },
    ],
  };
}

/** A running media server. */
export interface MediaServer {
  /** `127.0.0.1:<port>`. */
  host: string;
  port: number;
  /** PEM of the CA that issued the server's certificate. */
  ca: string;
  /** Hands out an auth token for uploads (the `media_conn` iq). */
  mediaConn(): MediaConn;
  /** Stores an encrypted file uploaded by a simulated phone (no HTTP round trip) and returns its record. */
  put(kind: string, file: Buffer): StoredMedia;
  /** The stored file at `directPath` (path with or without query), or undefined. */
  get(directPath: string): StoredMedia | undefined;
  /** How many files the server holds. */
  count(): number;
  /** Downloads `directPath` over HTTPS from this server, trusting its CA, as a phone downloads media. */
  download(directPath: string): Promise<Buffer>;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  response.end(text);
}

async function readBody(request: IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(request.headers['content-length'] ?? Number.NaN);
  if (declared > max) throw new HttpError(413, `body over ${max} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > max) throw new HttpError(413, `body over ${max} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * Starts the media server on `host` (default 127.0.0.1), a free port unless `port` is given. Rejects when the
 * port cannot be bound.
 */
export async function startMediaServer(options: {
  tls: MediaTls;
  log: Logger;
  host?: string;
  port?: number;
  /** Key of the direct paths' `oh` signatures (32 bytes); default a fresh one (media/persist.ts keeps it). */
  signing?: Buffer;
  /** Files stored before a restart (media/persist.ts), served again. */
  initial?: StoredMedia[];
  /** Called with every newly stored file (media/persist.ts writes it to the state directory). */
  onStore?: (stored: StoredMedia) => void;
}): Promise<MediaServer> {
  const { tls, log } = options;
  const bind = options.host ?? '127.0.0.1';
  const tokens = new Map<string, number>();
  const files = new Map<string, StoredMedia>((options.initial ?? []).map((f) => [f.path, f]));
  const signing = options.signing ?? randomBytes(32);
  let host = '';

  const sign = (path: string, oe: string) =>
    createHmac('sha256', signing).update(`${path}\n${oe}`).digest().subarray(0, 16).toString('base64url');

  const put = (kind: string, file: Buffer): StoredMedia => {
    let path: string;
    do
      path = `/v/t62.7118-24/${randomInt(1e9, 1e10 - 1)}${randomInt(1e8, 1e9 - 1)}_${randomInt(1e9, 1e10 - 1)}_n.enc`;
    while (files.has(path));
    const oe = Math.floor(Date.now() / 1000 + URL_TTL_SECONDS)
      .toString(16)
      .toUpperCase();
    const directPath = `${path}?ccb=11-4&oh=01_${sign(path, oe)}&oe=${oe}&_nc_sid=5e03e0`;
    const stored: StoredMedia = {
      kind,
      file,
      path,
      directPath,
      url: `https://${host}${directPath}&mms3=true`,
    };
    files.set(path, stored);
    options.onStore?.(stored);
    return stored;
  };

  const upload = async (request: IncomingMessage, url: URL): Promise<StoredMedia> => {
    const [, mms, kind, hash, ...rest] = url.pathname.split('/');
    if (mms !== 'mms' || !kind || !UPLOAD_KINDS.has(kind) || !hash || rest.length > 0)
      throw new HttpError(
        404,
        `no upload path ${url.pathname} (expected /mms/{image|video|audio|document}/<hash>)`,
      );
    const auth = url.searchParams.get('auth') ?? '';
    const expires = tokens.get(auth);
    if (expires === undefined)
      throw new HttpError(401, 'auth: not a token this server handed out (media_conn)');
    if (expires < Date.now()) throw new HttpError(401, 'auth: token expired, query media_conn again');
    if (url.searchParams.get('token') !== hash)
      throw new HttpError(400, 'token: must equal the hash in the path');
    const body = await readBody(request, MAX_UPLOAD_BYTES);
    if (body.length === 0) throw new HttpError(400, 'body: empty upload');
    if (uploadToken(sha256(body)) !== hash)
      throw new HttpError(400, 'body: SHA-256 of the upload does not match the hash in the path');
    return put(kind, body);
  };

  const find = (directPath: string): StoredMedia | undefined => {
    const url = new URL(directPath, 'https://media');
    return files.get(url.pathname);
  };

  const serve = (url: URL, response: ServerResponse, head: boolean): void => {
    const stored = files.get(url.pathname);
    if (!stored) throw new HttpError(404, `no media at ${url.pathname}`);
    const oe = url.searchParams.get('oe') ?? '';
    const given = Buffer.from(url.searchParams.get('oh') ?? '');
    const expected = Buffer.from(`01_${sign(url.pathname, oe)}`);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new HttpError(403, 'oh: URL signature does not match');
    if (Number.parseInt(oe, 16) * 1000 < Date.now()) throw new HttpError(403, 'oe: URL expired');
    response.writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': stored.file.length,
    });
    response.end(head ? undefined : stored.file);
  };

  const server: Server = createServer({ cert: tls.server.cert, key: tls.server.key }, (request, response) => {
    const url = new URL(request.url ?? '/', 'https://media');
    const handle = async () => {
      if (request.method === 'POST') {
        const stored = await upload(request, url);
        log.debug({ kind: stored.kind, bytes: stored.file.length, path: stored.path }, 'media uploaded');
        send(response, 200, { url: stored.url, direct_path: stored.directPath });
      } else if (request.method === 'GET' || request.method === 'HEAD') {
        serve(url, response, request.method === 'HEAD');
      } else throw new HttpError(405, `method ${request.method} not allowed`);
    };
    handle().catch((error: unknown) => {
      if (error instanceof HttpError) {
        log.info(
          { status: error.status, path: url.pathname, reason: error.message },
          'media request refused',
        );
        // Drain what the client still sends so it reads the answer instead of a reset.
        request.resume();
        send(response, error.status, { error: error.message });
        return;
      }
      log.error({ err: error }, 'media request failed');
      if (!response.headersSent) send(response, 500, { error: 'internal media server error' });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, bind, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  host = `${bind.includes(':') ? `[${bind}]` : bind}:${port}`;

  return {
    host,
    port,
    ca: tls.ca,
    mediaConn() {
      const auth = randomBytes(24).toString('base64');
      tokens.set(auth, Date.now() + AUTH_TTL_SECONDS * 1000);
      return { hostname: host, auth, ttlSeconds: AUTH_TTL_SECONDS, maxContentLengthBytes: MAX_UPLOAD_BYTES };
    },
    put,
    get: find,
    count: () => files.size,
    download(directPath) {
      return new Promise<Buffer>((resolve, reject) => {
        const req = httpsRequest(
          `https://${host}${directPath}`,
          // A fresh connection each time (no pooled socket from before a restart on the same port).
          { ca: tls.ca, method: 'GET', agent: false },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () => {
              const body = Buffer.concat(chunks);
              if (res.statusCode === 200) resolve(body);
              else reject(new Error(`media download answered ${res.statusCode}: ${body.toString('utf8')}`));
            });
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.end();
      });
    },
    close() {
      return new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
    },
  };
}
