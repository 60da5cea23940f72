import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import { isIP } from 'node:net';
import { verifyHmacSignature, verifyStandardSignature } from '../webhooks/verify.ts';
import type { CliIo } from './commands/context.ts';
import { CliError } from './errors.ts';

/**
 * `parley listen --webhook` (like `stripe listen`): a local HTTPS webhook receiver for developers (without
 * `--webhook`, `parley listen` reads the event stream instead: src/cli/listen-stream.ts,
 * docs/decisions/0033-listen-reads-the-stream.md). It serves HTTPS with a
 * certificate issued at start by a local CA kept in the data directory, sets itself as the webhook of an instance
 * of a running parley (through its HTTP API, with a test key), sets a fresh HMAC key, verifies both signatures
 * of every request (`x-hmac-signature` and Standard Webhooks' `webhook-signature`) and prints each event.
 * parley delivers to it only when the operator allows loopback (`WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32`) and trusts
 * the local CA (`OUTBOUND_CA_FILE=<DATA_DIR>/listen-ca.pem`).
 */

/** Largest webhook body accepted, bytes (a history sync can be large). */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** The path the receiver serves webhooks on. */
export const WEBHOOK_PATH = '/parley-webhook';

/** One request received by the listener, as printed (`--json`: one such object per line). */
export interface ReceivedEvent {
  /** True when both signatures matched. */
  verified: boolean;
  /** Why the request was refused (401), when it was. */
  error?: string;
  webhookId: string | null;
  /** `webhook-timestamp`, Unix seconds, or null when absent or malformed. */
  webhookTimestamp: number | null;
  /** The parsed body (`{ type, event, instanceId, sequence }`), or the raw text when it is not JSON. */
  payload: unknown;
}

/**
 * Checks one request's signatures under `hmacKey` at `nowSeconds` and describes it.
 * @returns the event with `verified` true only when `x-hmac-signature` and `webhook-signature` both match.
 */
export function inspectDelivery(
  hmacKey: string,
  body: Buffer,
  header: (name: string) => string | undefined,
  nowSeconds: number,
): ReceivedEvent {
  const hmac = verifyHmacSignature(hmacKey, body, header('x-hmac-signature'));
  const standard = verifyStandardSignature(
    hmacKey,
    body,
    {
      'webhook-id': header('webhook-id'),
      'webhook-timestamp': header('webhook-timestamp'),
      'webhook-signature': header('webhook-signature'),
    },
    nowSeconds,
  );
  const failures = [hmac, standard].flatMap((check) => (check.valid ? [] : [check.reason]));
  const text = body.toString('utf8');
  let payload: unknown = text;
  try {
    payload = JSON.parse(text);
  } catch {
    // printed as text
  }
  const timestamp = header('webhook-timestamp');
  return {
    verified: failures.length === 0,
    ...(failures.length === 0 ? {} : { error: failures.join('; ') }),
    webhookId: header('webhook-id') ?? null,
    webhookTimestamp: timestamp !== undefined && /^\d{1,12}$/.test(timestamp) ? Number(timestamp) : null,
    payload,
  };
}

/** One line for a person: time, type, sequence, verdict and the compact payload. */
function humanLine(event: ReceivedEvent): string {
  const payload = event.payload as { type?: unknown; sequence?: unknown; state?: unknown } | null;
  const type = typeof payload?.type === 'string' ? payload.type : 'unknown';
  const state = typeof payload?.state === 'string' ? ` ${payload.state}` : '';
  const sequence = typeof payload?.sequence === 'number' ? ` #${payload.sequence}` : '';
  const verdict = event.verified ? 'signatures verified' : `REFUSED (401): ${event.error ?? ''}`;
  const time = new Date().toISOString().slice(11, 19);
  return `${time}  ${type}${state}${sequence}  ${event.webhookId ?? '-'}  ${verdict}\n  ${JSON.stringify(event.payload)}`;
}

/** A minimal client of parley's HTTP API for the listener's setup calls. */
class ParleyApi {
  readonly #base: string;
  readonly #key: string;
  readonly #from: string | undefined;

  constructor(base: string, key: string, from: string | undefined) {
    this.#base = base.replace(/\/$/, '');
    this.#key = key;
    this.#from = from;
  }

  /**
   * Calls `path` (with `?from=` when an instance was named) and returns `data` of the envelope.
   * @throws CliError naming the call and parley's error message (or the network failure).
   */
  async call(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: object,
  ): Promise<Record<string, unknown>> {
    const url = `${this.#base}${path}${this.#from === undefined ? '' : `?from=${encodeURIComponent(this.#from)}`}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.#key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? String(error);
      throw new CliError(`cannot reach parley at ${this.#base} (${cause}); is it running? (--url)`);
    }
    const text = await response.text();
    let parsed: { data?: Record<string, unknown>; error?: { message?: string } } = {};
    try {
      parsed = JSON.parse(text);
    } catch {
      // reported below
    }
    if (!response.ok || parsed.data === undefined) {
      const message = parsed.error?.message ?? text.slice(0, 200);
      throw new CliError(`${method} ${path} answered ${response.status}: ${message}`);
    }
    return parsed.data;
  }
}

/** Options of {@link listen}. */
export interface ListenOptions {
  /** Base URL of the running parley, e.g. `http://localhost:8080`. */
  url: string;
  /** A test key (`svc_test_…`) with the scopes `chat:webhook` and `chat:session`. */
  key: string;
  /** The instance (UUID or linked phone); omitted: the one parley picks for the key. */
  from?: string;
  /** Address the receiver listens on and the webhook URL names (default 127.0.0.1). */
  host: string;
  /** TCP port; 0 picks a free one. */
  port: number;
  /** One JSON object per line on stdout instead of the human format. */
  json: boolean;
  /** The HMAC key to set (at least 32 characters); omitted: 32 random bytes, base64url. */
  hmacKey?: string;
  /** Directory of the local CA (default: the configured DATA_DIR). */
  caDir: string;
}

/**
 * The receiver's failure to listen as a CliError naming the option that fixes it (`--port`, `--host`), as `serve`
 * names PORT and HOST (docs/deploy.md "Start-up errors"); any other error is returned unchanged.
 */
export function listenerFailure(error: unknown, host: string, port: number): unknown {
  switch ((error as { code?: unknown } | null)?.code) {
    case 'EADDRINUSE':
      return new CliError(
        `--port ${port} is in use on ${host}: choose a free port, or leave --port out for any`,
      );
    case 'EACCES':
      return new CliError(
        `--port ${port} needs privileges this user lacks: choose 1024 or above, or leave --port out`,
      );
    case 'EADDRNOTAVAIL':
      return new CliError(
        `--host ${host} is not an address of this machine: choose one of its addresses (127.0.0.1)`,
      );
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new CliError(
        `--host ${host} does not resolve to an address: choose an address of this machine (127.0.0.1)`,
      );
    default:
      return error;
  }
}

/**
 * Runs the listener until `stop` resolves: issues the certificate, starts the HTTPS receiver, sets the webhook
 * URL and a new HMAC key on the instance, prints every request, and at stop puts back the URL that was
 * configured before (or removes the webhook when there was none) if the URL is still the listener's.
 * Status lines go to `io.err`; events to `io.out`.
 * @throws CliError for a live key (it would replace a live instance's webhook URL and HMAC key, which its real
 *   receiver depends on: docs/decisions/0033-listen-reads-the-stream.md), a short HMAC key, a setup call parley
 *   refused, a `--port`/`--host` it cannot listen on ({@link listenerFailure}) or a `--ca-dir` it cannot use.
 */
export async function listen(options: ListenOptions, io: CliIo, stop: Promise<void>): Promise<void> {
  if (!options.key.startsWith('svc_test_')) {
    throw new CliError(
      'parley listen --webhook takes a test key (svc_test_…): it replaces the instance webhook and HMAC key',
    );
  }
  const hmacKey = options.hmacKey ?? randomBytes(32).toString('base64url');
  if (hmacKey.length < 32) throw new CliError('--hmac-key must be at least 32 characters');

  // loaded on use: certificate generation pulls in an X.509 library every other CLI command can do without
  const { ensureLocalCa, issueServerCertificate } = await import('./listen-certificates.ts');
  const ca = await ensureLocalCa(options.caDir);
  const tls = await issueServerCertificate(ca, options.host);
  const server = createServer({ cert: tls.cert, key: tls.key }, (request, response) => {
    if (request.method !== 'POST') {
      response.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        response.writeHead(413).end();
        request.destroy();
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => {
      const event = inspectDelivery(
        hmacKey,
        Buffer.concat(chunks),
        (name) => {
          const value = request.headers[name];
          return Array.isArray(value) ? value.join(', ') : value;
        },
        Math.floor(Date.now() / 1000),
      );
      io.out(options.json ? JSON.stringify(event) : humanLine(event));
      response.writeHead(event.verified ? 204 : 401).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(listenerFailure(error, options.host, options.port)));
    server.listen(options.port, options.host, () => resolve());
  });
  try {
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : options.port;
    const hostInUrl = isIP(options.host) === 6 ? `[${options.host}]` : options.host;
    const webhookUrl = `https://${hostInUrl}:${port}${WEBHOOK_PATH}`;
    const api = new ParleyApi(options.url, options.key, options.from);

    const status = await api.call('GET', '/v1/session/status');
    const before = await api.call('GET', '/v1/webhook');
    const previous = typeof before.webhook === 'string' ? before.webhook : '';
    const allowed = `WEBHOOK_ALLOWED_CIDRS=${options.host}/${isIP(options.host) === 6 ? 128 : 32} OUTBOUND_CA_FILE=${ca.certPath}`;
    // The URL first: it is what a server without the development settings refuses, and then nothing has
    // changed yet (the instance keeps its HMAC key, which parley never shows and so could not be put back).
    try {
      await api.call('POST', '/v1/webhook', { webhookUrl });
    } catch (error) {
      if (error instanceof CliError && error.message.includes('answered 400: webhookUrl')) {
        throw new CliError(
          `${error.message}. parley delivers to this receiver only when started with ${allowed} (settings for a development server; see npx parley listen --help)`,
        );
      }
      throw error;
    }
    try {
      await api.call('POST', '/v1/session/hmac/config', { hmacKey });
    } catch (error) {
      await restoreWebhook(api, webhookUrl, previous).catch(() => undefined);
      throw error;
    }

    io.err(`parley listen: ${webhookUrl} is the webhook of instance ${String(status.instanceId)}`);
    io.err('  every request is checked against a new HMAC key (x-hmac-signature and webhook-signature)');
    io.err(`  parley delivers here when started with ${allowed}`);
    if (ca.created) io.err('  (the local CA was just created: restart parley with those settings)');
    io.err('Ready: waiting for events (Ctrl-C to stop)');

    await stop;

    if (await restoreWebhook(api, webhookUrl, previous)) {
      io.err(previous === '' ? 'webhook removed' : `webhook set back to ${previous}`);
    }
  } finally {
    await closeServer(server);
  }
}

/**
 * Puts back the webhook URL `previous` (empty: removes the webhook) if the instance's URL is still the
 * listener's `webhookUrl` (someone may have set another meanwhile).
 * @returns whether it changed the webhook.
 * @throws CliError when parley refuses the change.
 */
async function restoreWebhook(api: ParleyApi, webhookUrl: string, previous: string): Promise<boolean> {
  const current = await api.call('GET', '/v1/webhook').catch(() => undefined);
  if (current?.webhook !== webhookUrl) return false;
  if (previous === '') await api.call('DELETE', '/v1/webhook');
  else await api.call('POST', '/v1/webhook', { webhookUrl: previous });
  return true;
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
