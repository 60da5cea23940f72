/**
 * `createParleyClient`: parley's HTTP API as typed calls (docs/client.md, docs/decisions/0032-client-library.md).
 * Every route is reachable through the generic `request` / `get` / `post` / `put` / `patch` / `delete`, typed by
 * the schema generated from `/openapi.json`; the common operations also have methods of their own. Every call
 * resolves with the `data` of parley's envelope and raises a {@link ParleyError} for an error answer.
 */
import { ParleyError } from './errors.js';
import {
  createPollingTransport,
  type EventStream,
  type EventsOptions,
  type EventTransport,
  eventStream,
  pinInstance,
  type ReadEventPage,
} from './events.js';
import {
  type CallSpec,
  type Connection,
  DEFAULT_RETRY_POLICY,
  type FetchLike,
  INSTANCE_ID_HEADER,
  type RetryPolicy,
  send,
} from './http.js';
import { createStreamTransport } from './stream.js';
import type {
  CallArgs,
  CallResult,
  ConnectBody,
  EventType,
  HttpMethod,
  MediaBody,
  MediaKind,
  PathsWith,
  RequestOptions,
  Schema,
  TextBody,
  WebhookBody,
} from './types.js';

/** What {@link createParleyClient} takes. */
export interface ParleyClientOptions {
  /** The server's base URL, e.g. `https://parley.example.com` (a path prefix is kept: `https://host/parley`). */
  baseUrl: string | URL;
  /** An API key (`svc_test_…` or `svc_live_…`), sent as `Authorization: Bearer` (docs/api.md "Conventions"). */
  apiKey: string;
  /**
   * The instance every call addresses unless told otherwise: its UUID or linked phone number, sent as
   * `x-instance-id`. Omitted: parley picks (the most recently connected instance;
   * docs/decisions/0002-instance-resolution.md).
   */
  instance?: string | undefined;
  /** The `fetch` to call; default: the global `fetch`. */
  fetch?: FetchLike | undefined;
  /**
   * Retries of 429, 503 and failures before any answer: how many after the first attempt (default 3; 0 disables), or
   * a partial {@link RetryPolicy}. Other statuses are never retried.
   */
  retries?: number | Partial<RetryPolicy> | undefined;
  /** Time limit of each attempt, ms; past it the attempt counts as a failure before any answer. Default: none. */
  timeoutMs?: number | undefined;
  /**
   * Headers sent on every request. Those the client makes (`authorization`, `x-instance-id`, `idempotency-key`,
   * `content-type`) and a call's own `headers` replace the one of the same name here, whatever its case.
   */
  headers?: Record<string, string> | undefined;
}

/** Options of a send: those of every call, and `async` to queue it. */
export interface SendOptions extends RequestOptions {
  /**
   * true: queue the send and answer 202 `Queued` at once (`Prefer: respond-async`); the outcome arrives as a
   * `MessageStatus` event (docs/decisions/0009-sends-as-jobs.md). Default false: answer 200 `Sent` once relayed.
   */
  async?: boolean | undefined;
}

/** The query of one page of the event log (docs/api.md "Event log"). */
export interface EventsPageQuery {
  /** Only events with a greater sequence; default 0 (from the oldest kept). */
  after?: number | undefined;
  /** Most events in the page, 1 to 1,000; default 100. */
  limit?: number | undefined;
  /** Only these types; default every type. */
  types?: EventType[] | undefined;
}

/** The typed generic call of one method: the paths that take it, their options, their `data`. */
export type MethodCall<M extends HttpMethod> = <P extends PathsWith<M>>(
  path: P,
  ...args: CallArgs<P, M>
) => Promise<CallResult<P, M>>;

/** A client of one parley server and API key, made by {@link createParleyClient}. */
export interface ParleyClient {
  /**
   * Calls any route: `request('post', '/v1/sandbox/scan', { body: { phone } })`. The path, its `query`, `path`
   * parameters and `body` are typed by the schema generated from `/openapi.json`; resolves with the answer's `data`.
   * @throws ParleyError for an error answer (after the retries of 429/503); ParleyNetworkError when no attempt got an
   * answer; ParleyOutcomeUnknownError (a ParleyError) for a DELETE's 404 after an attempt that got no answer; the
   * signal's reason when `signal` aborts; TypeError for a header name or value `Headers` refuses.
   */
  request<M extends HttpMethod, P extends PathsWith<M>>(
    method: M,
    path: P,
    ...args: CallArgs<P, M>
  ): Promise<CallResult<P, M>>;
  /** `request('get', …)`. */
  get: MethodCall<'get'>;
  /** `request('post', …)`: carries an `Idempotency-Key` (docs/decisions/0010-idempotency.md). */
  post: MethodCall<'post'>;
  /** `request('put', …)`. */
  put: MethodCall<'put'>;
  /**
   * `request('patch', …)`: changes the fields the body names (`PATCH /v1/instances/{id}`, `/v1/webhooks/{id}`,
   * `/v1/labels/{id}`); retried like `put`, since each sets its fields to the values given
   * (docs/decisions/0092-client-retries-of-patch-and-delete.md).
   */
  patch: MethodCall<'patch'>;
  /**
   * `request('delete', …)`. A 404 after an attempt that got no answer rejects with ParleyOutcomeUnknownError (that
   * attempt may have deleted it; docs/decisions/0092-client-retries-of-patch-and-delete.md).
   */
  delete: MethodCall<'delete'>;

  /**
   * Sends a text (`POST /v1/messages/send`, docs/api.md "Messages"): resolves with `Sent` (`id`, `timestamp`) or,
   * with `async` or `sendAt`, `Queued` (`id`, `status: pending`, `sendAt`).
   * @throws ParleyError e.g. 400 `phone is required`, 422 `recipient … is not registered on the platform`.
   */
  sendText(body: TextBody, options?: SendOptions): Promise<CallResult<'/v1/messages/send', 'post'>>;
  /**
   * Sends a media message (`POST /v1/messages/send/{kind}`): the file as an `https://` URL or a `data:` URI (see
   * {@link dataUri}) in the field named after the kind (`image`, `document`, `audio`, `video`, `sticker`).
   * @throws ParleyError e.g. 413 when the file is over its limit.
   */
  sendMedia<K extends MediaKind>(
    kind: K,
    body: MediaBody<K>,
    options?: SendOptions,
  ): Promise<CallResult<`/v1/messages/send/${K}`, 'post'>>;

  /** The session of the addressed instance (docs/api.md "Session"). */
  session: {
    /** `GET /v1/session/status`: `connected`, `loggedIn`, `jid`, `reason`, … */
    status(options?: RequestOptions): Promise<Schema<'SessionStatus'>>;
    /** `POST /v1/session/connect`: starts pairing, or resumes the stored session. */
    connect(body?: ConnectBody, options?: RequestOptions): Promise<Schema<'ConnectResult'>>;
    /** `GET /v1/session/qr`: the current pairing QR code (`qrCode` PNG data URI, `code`, `expiresAt`). */
    qr(options?: RequestOptions): Promise<Schema<'QrResult'>>;
    /** `POST /v1/session/disconnect`: closes the connection, keeps the link. */
    disconnect(options?: RequestOptions): Promise<Schema<'Details'>>;
    /** `POST /v1/session/logout`: unlinks the device and deletes the stored credentials. */
    logout(options?: RequestOptions): Promise<Schema<'Details'>>;
  };

  /** The webhook of the addressed instance (docs/api.md "Webhook"). */
  webhook: {
    /** `GET /v1/webhook`: the URL, the subscription and whether delivery is disabled. */
    get(options?: RequestOptions): Promise<Schema<'WebhookConfig'>>;
    /** `POST /v1/webhook`: sets the URL (HTTPS only). */
    set(body: WebhookBody, options?: RequestOptions): Promise<CallResult<'/v1/webhook', 'post'>>;
    /** `DELETE /v1/webhook`: removes the URL. */
    remove(options?: RequestOptions): Promise<Schema<'Details'>>;
    /** `POST /v1/session/hmac/config`: the key both signatures are made with (at least 32 characters). */
    setHmacKey(hmacKey: string, options?: RequestOptions): Promise<Schema<'Details'>>;
  };

  /**
   * One page of the event log (`GET /v1/events`): `{ events, next }`, `next` never null (pass it as `after`). Without
   * `instance` (here or the client's) each call reads the instance parley picks at that moment, which another
   * instance's connecting changes: to page through one log, name its instance, or use {@link ParleyClient.events},
   * which keeps to the first (docs/decisions/0091-event-reads-name-their-instance.md).
   * @throws ParleyError e.g. 400 `types contains unknown event type …`.
   */
  eventsPage(query?: EventsPageQuery, options?: RequestOptions): Promise<Schema<'EventsPage'>>;
  /**
   * The event log as an async iterable: the backlog from `after` in `sequence` order, then, with `follow` (the
   * default), new events as they are recorded: pushed over `GET /v1/events/stream` (`transport: 'stream'`, the
   * default; reconnecting after the last event handed out) or polled every `intervalMs` (`transport: 'poll'`).
   * Abort `signal` to stop; `cursor` says where to resume. Without `instance` (here or the client's), the instance
   * parley names in its first answer is sent on every later page, poll and reconnect, so the iteration keeps to one
   * log when another instance becomes the default (docs/decisions/0091-event-reads-name-their-instance.md). A read
   * that fails after its retries makes the loop throw (ParleyError, e.g. 403 without `chat:webhook`;
   * ParleyNetworkError).
   */
  events(options?: EventsOptions): EventStream;
}

/** The {@link RetryPolicy} of the `retries` option. @throws TypeError for a negative or fractional value. */
function retryPolicy(option: ParleyClientOptions['retries']): RetryPolicy {
  const policy = {
    ...DEFAULT_RETRY_POLICY,
    ...(typeof option === 'number' ? { retries: option } : option),
  };
  for (const [name, value] of Object.entries(policy)) {
    if (!Number.isInteger(value) || value < 0)
      throw new TypeError(`retries.${name} must be a whole number >= 0`);
  }
  return policy;
}

/**
 * Creates a client of one parley server.
 * @throws TypeError when `baseUrl` is not an http(s) URL or `apiKey` is empty, or `retries` is malformed.
 */
export function createParleyClient(options: ParleyClientOptions): ParleyClient {
  const base = new URL(String(options.baseUrl));
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new TypeError(`baseUrl must be an http:// or https:// URL, got ${base.protocol}`);
  }
  if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('apiKey is required');
  const fetcher: FetchLike = options.fetch ?? ((input, init) => fetch(input, init));
  const connection: Connection = {
    baseUrl: `${base.origin}${base.pathname.replace(/\/+$/, '')}`,
    apiKey: options.apiKey,
    instance: options.instance,
    fetch: fetcher,
    retry: retryPolicy(options.retries),
    timeoutMs: options.timeoutMs,
    headers: { ...options.headers },
  };

  /** The untyped call behind every typed one. */
  const call = (
    method: HttpMethod,
    path: string,
    options: (RequestOptions & { query?: unknown; path?: unknown; body?: unknown }) | undefined = {},
  ): Promise<unknown> => {
    const spec: CallSpec = {
      method,
      path,
      pathParams: options.path as CallSpec['pathParams'],
      query: options.query as CallSpec['query'],
      body: options.body,
      instance: options.instance,
      headers: options.headers,
      signal: options.signal,
      idempotencyKey: options.idempotencyKey,
    };
    return send(connection, spec);
  };
  const request = call as ParleyClient['request'];
  const method =
    <M extends HttpMethod>(name: M): MethodCall<M> =>
    (path, ...args) =>
      request(name, path, ...args);
  const get = method('get');
  const post = method('post');

  const sendOptions = (options: SendOptions | undefined): RequestOptions => {
    const { async, ...rest } = options ?? {};
    return async ? { ...rest, headers: { ...rest.headers, prefer: 'respond-async' } } : rest;
  };

  const eventsPage = (query: EventsPageQuery = {}, options: RequestOptions = {}) =>
    get('/v1/events', {
      ...options,
      query: {
        ...(query.after === undefined ? {} : { after: query.after }),
        ...(query.limit === undefined ? {} : { limit: query.limit }),
        ...(query.types === undefined ? {} : { types: query.types.join(',') }),
      },
    });

  return {
    request,
    get,
    post,
    put: method('put'),
    patch: method('patch'),
    delete: method('delete'),
    sendText: (body, options) => post('/v1/messages/send', { ...sendOptions(options), body }),
    sendMedia: (kind, body, options) =>
      call('post', `/v1/messages/send/${kind}`, { ...sendOptions(options), body }) as ReturnType<
        ParleyClient['sendMedia']
      >,
    session: {
      status: (options) => get('/v1/session/status', options),
      connect: (body, options) => post('/v1/session/connect', { ...options, body }),
      qr: (options) => get('/v1/session/qr', options),
      disconnect: (options) => post('/v1/session/disconnect', options),
      logout: (options) => post('/v1/session/logout', options),
    },
    webhook: {
      get: (options) => get('/v1/webhook', options),
      set: (body, options) => post('/v1/webhook', { ...options, body }),
      remove: (options) => request('delete', '/v1/webhook', options),
      setHmacKey: (hmacKey, options) => post('/v1/session/hmac/config', { ...options, body: { hmacKey } }),
    },
    eventsPage,
    events(options = {}) {
      const limit = options.limit ?? 100;
      const pin = pinInstance(options.instance ?? connection.instance);
      const readPage: ReadEventPage = async (query, signal) => {
        const page = (await send(connection, {
          method: 'GET',
          path: '/v1/events',
          query: { after: query.after, limit: query.limit, types: query.types },
          instance: pin.instance,
          signal,
          onAnswer: (response) => pin.learn(response.headers.get(INSTANCE_ID_HEADER)),
        })) as Schema<'EventsPage'>;
        // A server that does not name the instance in a header: its first entry does.
        pin.learn(page.events[0]?.instanceId);
        return page;
      };
      const choice = options.transport ?? 'stream';
      let transport: EventTransport;
      if (choice === 'poll') transport = createPollingTransport(readPage, options.intervalMs ?? 1000);
      else if (choice === 'stream') {
        transport = createStreamTransport({
          connection,
          pin,
          readPage,
          idleTimeoutMs: options.idleTimeoutMs,
        });
      } else transport = choice;
      return eventStream(transport, {
        after: options.after ?? 0,
        types: options.types,
        limit,
        follow: options.follow ?? true,
        signal: options.signal,
      });
    },
  };
}

/**
 * A `data:` URI of `bytes` (base64), what the media sends accept besides an `https://` URL (docs/api.md "Messages").
 * @param bytes the file.
 * @param mimeType its type, e.g. `image/png` (parley reads the real format from the bytes).
 */
export function dataUri(bytes: Uint8Array, mimeType: string): string {
  let binary = '';
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return `data:${mimeType};base64,${btoa(binary)}`;
}

/** True when `error` is a {@link ParleyError} (optionally of one HTTP status): `isParleyError(e, 404)`. */
export function isParleyError(error: unknown, status?: number): error is ParleyError {
  return error instanceof ParleyError && (status === undefined || error.status === status);
}
