/**
 * One logical call to parley: the request built once (its body serialised once, so every retry sends the same
 * bytes), sent with bounded retries, and the answer unwrapped from parley's envelope or raised as a
 * {@link ParleyError} (docs/decisions/0032-client-library.md).
 *
 * Headers: the client's defaults, the connection's `headers`, then what the call makes (`authorization`,
 * `x-instance-id`, `idempotency-key`, `content-type`), then the call's own `headers`; a later layer replaces an
 * earlier one's header of the same name, whatever case either spells it in (RFC 9110 section 5.1: names are
 * case-insensitive), so a caller's `Idempotency-Key` is the call's key (docs/client.md "Retries and idempotency").
 *
 * Retries: a POST carries an `Idempotency-Key`, made once per call and sent again on each retry, so parley carries the
 * operation out at most once (docs/decisions/0010-idempotency.md). Retried, for every method (GET, POST, PUT, PATCH,
 * DELETE): a failure before any answer (connection refused or reset, the per-attempt timeout), 429 and 503, each
 * after a backoff that honours `Retry-After`; and, for a POST, the 409 `a request with this Idempotency-Key is in
 * progress` that a retry gets while the first attempt (whose answer was lost) is still running: the retry after it
 * replays that attempt's answer (docs/api.md "Idempotency"). Never retried: any other status (400, 401, 403, 404,
 * other 409s, 422, …, 500, 502, 504). parley keeps answers for a key on POSTs only, so the other methods are retried
 * because they are idempotent: a PATCH of parley sets the fields it names to the values given, and a DELETE that
 * meets 404 after an attempt whose answer was lost raises {@link ParleyOutcomeUnknownError}, since that attempt may
 * be what deleted it (docs/decisions/0092-client-retries-of-patch-and-delete.md).
 */
import { type CallInfo, ParleyError, ParleyNetworkError, ParleyOutcomeUnknownError } from './errors.js';

/** The `fetch` the client calls: the global one, or any function of the same shape (a test double, a proxy agent). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** How a call is retried (docs/decisions/0032-client-library.md). */
export interface RetryPolicy {
  /** Most retries after the first attempt; 0 disables retrying. Default 3 (4 attempts). */
  retries: number;
  /** Backoff before the first retry, ms; doubled for each further one, with jitter (50 to 100 %). Default 500. */
  minDelayMs: number;
  /** Largest backoff, ms. Default 10,000. */
  maxDelayMs: number;
  /**
   * Longest wait a `Retry-After` may ask for, seconds: a 429 or 503 asking to wait longer (e.g. the platform's
   * reach-out timelock, an hour) is raised at once as a {@link ParleyError} with its `retryAfter`, for the caller to
   * schedule. Default 60.
   */
  maxRetryAfterSeconds: number;
}

/** The defaults of {@link RetryPolicy}. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = {
  retries: 3,
  minDelayMs: 500,
  maxDelayMs: 10_000,
  maxRetryAfterSeconds: 60,
};

/** Statuses retried: a rate limit (429) and a server that cannot serve right now (503), docs/api.md "Errors". */
const RETRIED_STATUSES = new Set([429, 503]);

/** The message of parley's 409 for a key whose first request is still running (docs/api.md "Idempotency"). */
const KEY_IN_PROGRESS = 'a request with this Idempotency-Key is in progress';

/** Whether `failure` (an answer of a call carrying `idempotencyKey`) is retried. */
function retried(failure: ParleyError, idempotencyKey: string | undefined): boolean {
  if (RETRIED_STATUSES.has(failure.status)) return true;
  return idempotencyKey !== undefined && failure.status === 409 && failure.message === KEY_IN_PROGRESS;
}

/**
 * The header naming an instance: sent to address one, and answered by the event log's pages and the event stream's
 * opening answer with the instance they read (docs/decisions/0091-event-reads-name-their-instance.md).
 */
export const INSTANCE_ID_HEADER = 'x-instance-id';

/** What {@link send} needs of the client. */
export interface Connection {
  /** The server's base URL, without a trailing slash (`https://parley.example.com`). */
  baseUrl: string;
  /** The API key, sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** The default instance (UUID or phone), sent as `x-instance-id`; undefined: parley's default resolution. */
  instance: string | undefined;
  /** The `fetch` every attempt goes through. */
  fetch: FetchLike;
  /** How calls are retried. */
  retry: RetryPolicy;
  /** Per-attempt time limit, ms; undefined: none. An attempt past it counts as a failure before any answer. */
  timeoutMs: number | undefined;
  /** Headers sent on every request; the call's own and those the client makes replace them (see {@link send}). */
  headers: Record<string, string>;
}

/** One call as the typed layer hands it over. */
export interface CallSpec {
  /** Upper-case HTTP method. */
  method: string;
  /** The path template, e.g. `/v1/messages/{id}`. */
  path: string;
  /** Values of the path's `{parameters}`. */
  pathParams?: Record<string, string | number> | undefined;
  /** Query parameters; undefined values are left out. */
  query?: Record<string, unknown> | undefined;
  /** The JSON body, serialised once for every attempt. */
  body?: unknown;
  /** The instance (`x-instance-id`); undefined: the connection's. */
  instance?: string | undefined;
  /**
   * Extra headers, the last layer: each replaces the header of the same name, in any case, that the connection or
   * the client would send (an `Idempotency-Key` given here is the call's key).
   */
  headers?: Record<string, string> | undefined;
  /** Cancels the call and its retries. */
  signal?: AbortSignal | undefined;
  /** The `Idempotency-Key` of a POST; undefined: an `idempotency-key` of `headers`, else a new UUID. */
  idempotencyKey?: string | undefined;
  /**
   * Called with the successful answer before its `data` is resolved, for what only its headers say (the event log's
   * `x-instance-id`); not called for an error answer.
   */
  onAnswer?: ((response: Response) => void) | undefined;
}

/**
 * The path with its `{parameters}` filled in (each percent-encoded) and its query string (undefined values left out,
 * arrays comma-separated as parley's list parameters are).
 * @throws TypeError naming a path parameter that has no value.
 */
export function resolvePath(spec: Pick<CallSpec, 'path' | 'pathParams' | 'query'>): string {
  const path = spec.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = spec.pathParams?.[name];
    if (value === undefined) throw new TypeError(`path parameter ${name} of ${spec.path} is required`);
    return encodeURIComponent(String(value));
  });
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(spec.query ?? {})) {
    if (value === undefined || value === null) continue;
    search.set(name, Array.isArray(value) ? value.map(String).join(',') : String(value));
  }
  const query = search.toString();
  return query === '' ? path : `${path}?${query}`;
}

/** A new random UUID (Web Crypto's, present in Node 20, browsers, Deno and Bun). */
function randomKey(): string {
  return crypto.randomUUID();
}

/**
 * The headers of `layers` merged, a later layer's header replacing an earlier one's of the same name whatever case
 * either spells it in (header names are case-insensitive, RFC 9110 section 5.1); an undefined layer adds nothing.
 * → the headers, their names in lower case (as a `Headers` object gives them).
 * @throws TypeError for a name or value a `Headers` object refuses (a line break in a value, say).
 */
export function mergeHeaders(
  ...layers: (Readonly<Record<string, string>> | undefined)[]
): Record<string, string> {
  const headers = new Headers();
  for (const layer of layers) {
    for (const [name, value] of Object.entries(layer ?? {})) headers.set(name, value);
  }
  const merged: Record<string, string> = {};
  headers.forEach((value, name) => {
    merged[name] = value;
  });
  return merged;
}

/**
 * Waits `ms`, or rejects with the signal's reason as soon as it aborts.
 * @throws the signal's reason when it aborts.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Seconds a `Retry-After` header asks to wait: delay-seconds, or an HTTP date (RFC 9110 section 10.2.3) counted from
 * now; undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** The backoff before retry number `retry` (1-based), ms: exponential from `minDelayMs`, capped, 50-100 % jitter. */
function backoff(policy: RetryPolicy, retry: number): number {
  const base = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** (retry - 1));
  return Math.round(base * (0.5 + Math.random() / 2));
}

/** An answer read to its end: the response (status, headers) and its body. */
interface Answer {
  response: Response;
  /** The body: text for JSON and empty answers, bytes for anything else (a file). */
  body: string | Blob;
}

/** Whether a content type is JSON (`application/json`, `application/problem+json`, …). */
function isJson(contentType: string | null): boolean {
  return /^application\/(.+\+)?json\b/i.test(contentType ?? '');
}

/**
 * Reads the whole answer, within the attempt: a connection that breaks or times out while the body streams is a
 * failure before any answer, retried like one.
 */
async function readAnswer(response: Response): Promise<Answer> {
  const json = isJson(response.headers.get('content-type'));
  return { response, body: json || !response.ok ? await response.text() : await response.blob() };
}

/** The parsed JSON of a text body, or undefined when it is empty or not JSON. */
function parseJson(body: string | Blob): unknown {
  if (typeof body !== 'string' || body === '') return undefined;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The {@link ParleyError} of an error answer: the envelope's message, or the status when it is not parley's. */
function errorOf({ response, body }: Answer, info: CallInfo): ParleyError {
  const parsed = parseJson(body);
  const envelope = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined;
  const message =
    typeof envelope?.message === 'string'
      ? envelope.message
      : `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''} (not a parley error answer)`;
  const fromBody = typeof envelope?.retryAfter === 'number' ? envelope.retryAfter : undefined;
  return new ParleyError(response.status, message, {
    ...info,
    retryAfter: parseRetryAfter(response.headers.get('retry-after')) ?? fromBody,
    requestId: response.headers.get('x-request-id') ?? undefined,
  });
}

/** What a successful answer resolves to: the envelope's `data`, other JSON as is, a file as a `Blob`. */
function resultOf({ response, body }: Answer): unknown {
  if (typeof body !== 'string') return body;
  if (response.status === 204 || body === '') return undefined;
  const parsed = parseJson(body);
  return isRecord(parsed) && parsed.success === true && 'data' in parsed ? parsed.data : parsed;
}

/** The signal of one attempt: the caller's, and the per-attempt timeout when there is one. */
function attemptSignal(
  caller: AbortSignal | undefined,
  timeoutMs: number | undefined,
): AbortSignal | undefined {
  const signals = [caller, timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)].filter(
    (signal): signal is AbortSignal => signal !== undefined,
  );
  if (signals.length <= 1) return signals[0];
  return AbortSignal.any(signals);
}

/**
 * Makes one logical call: builds the request once, sends it, retries as the module comment says, and resolves with
 * the answer's `data` (see {@link resultOf}).
 * @throws ParleyOutcomeUnknownError for a DELETE answered 404 after an attempt that got no answer.
 * @throws ParleyError for an answer outside 2xx that is not retried, or once the retries are spent.
 * @throws ParleyNetworkError when no attempt got an answer.
 * @throws the signal's reason when `spec.signal` aborts.
 * @throws TypeError for a path parameter without a value, or a header name or value `Headers` refuses.
 */
export async function send(connection: Connection, spec: CallSpec): Promise<unknown> {
  const method = spec.method.toUpperCase();
  const path = resolvePath(spec);
  // Serialised once: a retry must send the same bytes, or parley answers 422 (the key's fingerprint covers them).
  const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
  const made: Record<string, string> = { authorization: `Bearer ${connection.apiKey}` };
  const instance = spec.instance ?? connection.instance;
  if (instance !== undefined) made[INSTANCE_ID_HEADER] = instance;
  if (method === 'POST') made['idempotency-key'] = spec.idempotencyKey ?? randomKey();
  if (body !== undefined) made['content-type'] = 'application/json';
  const headers = mergeHeaders({ accept: 'application/json' }, connection.headers, made, spec.headers);
  // The key the attempts carry, the caller's own header included, is the one an error reports.
  const idempotencyKey = method === 'POST' ? headers['idempotency-key'] : undefined;
  const url = `${connection.baseUrl}${path}`;
  const policy = connection.retry;
  /** Attempts that got no answer: each may have been carried out. */
  let unanswered = 0;
  for (let attempt = 1; ; attempt++) {
    spec.signal?.throwIfAborted();
    const info: CallInfo = { method, path, attempts: attempt, idempotencyKey };
    const retriesLeft = attempt <= policy.retries;
    let answer: Answer;
    try {
      const signal = attemptSignal(spec.signal, connection.timeoutMs);
      const response = await connection.fetch(url, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        ...(signal === undefined ? {} : { signal }),
      });
      answer = await readAnswer(response);
    } catch (error) {
      spec.signal?.throwIfAborted();
      unanswered++;
      if (!retriesLeft) throw new ParleyNetworkError(info, error);
      await sleep(backoff(policy, attempt), spec.signal);
      continue;
    }
    if (answer.response.ok) {
      spec.onAnswer?.(answer.response);
      return resultOf(answer);
    }
    const failure = errorOf(answer, info);
    if (method === 'DELETE' && failure.status === 404 && unanswered > 0) {
      throw new ParleyOutcomeUnknownError(failure, unanswered);
    }
    if (!retriesLeft || !retried(failure, idempotencyKey)) throw failure;
    const asked = failure.retryAfter;
    if (asked !== undefined && asked > policy.maxRetryAfterSeconds) throw failure;
    await sleep(Math.max(backoff(policy, attempt), (asked ?? 0) * 1000), spec.signal);
  }
}
