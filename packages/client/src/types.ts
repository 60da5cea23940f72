/**
 * Types derived from the generated {@link paths} (src/schema.ts, written by `npm run client:generate` from parley's
 * `/openapi.json`): which paths take which method, what a call's query, path parameters and body are, and what its
 * answer's `data` is. A route change regenerates the schema and these follow (docs/decisions/0032-client-library.md).
 */
import type { components, paths } from './schema.js';

/**
 * An HTTP method the API uses, in the lower case of the generated schema: `patch` changes the fields it names of an
 * instance, a webhook endpoint or a label (docs/api.md).
 */
export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * The paths the client calls: the `/v1` API and the health checks. The gateway form's paths (docs/gateway.md) and
 * `/metrics` are for other clients.
 */
export type ApiPath = Extract<keyof paths, `/v1/${string}` | '/healthz' | '/readyz'>;

/** The paths that take method `M`. */
export type PathsWith<M extends HttpMethod> = {
  [P in ApiPath]: paths[P][M] extends undefined ? never : P;
}[ApiPath];

/** The generated operation of `M` on `P` (its parameters, request body and responses). */
export type Operation<P extends ApiPath, M extends HttpMethod> = NonNullable<paths[P][M]>;

/** `T` without `undefined`, or `never` when nothing else is left. */
type Defined<T> = Exclude<T, undefined>;

type ParametersOf<O> = O extends { parameters: infer X } ? X : never;
type QueryOf<O> = Defined<ParametersOf<O> extends { query?: infer Q } ? Q : never>;
type PathParamsOf<O> = Defined<ParametersOf<O> extends { path?: infer Q } ? Q : never>;
type RequestBodyOf<O> = Defined<O extends { requestBody?: infer B } ? B : never>;
type JsonBodyOf<O> = [RequestBodyOf<O>] extends [never]
  ? never
  : RequestBodyOf<O> extends { content: { 'application/json': infer J } }
    ? J
    : never;

/** The `query` option of an operation: required when a query parameter is, absent when it takes none. */
type QueryOption<O> = [QueryOf<O>] extends [never]
  ? { query?: undefined }
  : object extends QueryOf<O>
    ? { query?: QueryOf<O> }
    : { query: QueryOf<O> };

/** The `path` option: the values of the path's `{parameters}`, when it has some. */
type PathOption<O> = [PathParamsOf<O>] extends [never] ? { path?: undefined } : { path: PathParamsOf<O> };

/** The `body` option: required when the operation's body is, absent when it takes none. */
type BodyOption<O> = [JsonBodyOf<O>] extends [never]
  ? { body?: undefined }
  : O extends { requestBody: unknown }
    ? { body: JsonBodyOf<O> }
    : { body?: JsonBodyOf<O> };

/** What every call takes besides the operation's own parameters. */
export interface RequestOptions {
  /**
   * The instance to address: its UUID or linked phone number, sent as `x-instance-id` (a body or query `from` wins;
   * docs/decisions/0002-instance-resolution.md). Default: the client's `instance`.
   */
  instance?: string | undefined;
  /**
   * Extra request headers (e.g. `Prefer: respond-async` to queue a send, docs/api.md "Messages"), sent last: each
   * replaces the header of the same name, in any case, that the client or its `headers` option would send. An
   * `Idempotency-Key` given here is the call's key, as `idempotencyKey` is (docs/client.md "Retries and idempotency").
   */
  headers?: Record<string, string> | undefined;
  /** Cancels the call, its retries and their waits; the call then rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /**
   * The `Idempotency-Key` of a POST (docs/decisions/0010-idempotency.md): 1 to 255 printable ASCII characters. Default:
   * a new random UUID per call, the same on each of its retries. Pass your own (e.g. an order id) to make a call
   * safe to repeat across process restarts. Ignored on other methods; an `Idempotency-Key` of `headers` wins over it.
   */
  idempotencyKey?: string | undefined;
}

/** The options of a call of `M` on `P`: its `query`, `path` parameters and `body` as the schema types them. */
export type CallOptions<P extends ApiPath, M extends HttpMethod> = QueryOption<Operation<P, M>> &
  PathOption<Operation<P, M>> &
  BodyOption<Operation<P, M>> &
  RequestOptions;

/** The arguments after the path: the options, optional when none of them is required. */
export type CallArgs<P extends ApiPath, M extends HttpMethod> =
  object extends CallOptions<P, M> ? [options?: CallOptions<P, M>] : [options: CallOptions<P, M>];

/** The status codes of a successful answer. */
type SuccessStatus = 200 | 201 | 202 | 204;

/**
 * What one success response resolves to: the envelope's `data` for JSON answers, the bytes as a `Blob` for files
 * (`GET /v1/messages/{id}/media`), `undefined` for an answer without a body.
 */
type ResultOfResponse<R> = R extends { content: { 'application/json': { data: infer D } } }
  ? D
  : R extends { content: { 'application/json': infer J } }
    ? J
    : R extends { content: object }
      ? Blob
      : undefined;

type ResponsesOf<O> = O extends { responses: infer R } ? R : never;

/**
 * What a successful call of `M` on `P` resolves to: the `data` of parley's envelope (`{ success, code, data }`,
 * docs/decisions/0001-envelope-and-error-codes.md), a union when the operation has several success answers (a send:
 * 200 `SendResult` or 202 `QueuedResult`).
 */
export type CallResult<P extends ApiPath, M extends HttpMethod> = ResultOfResponse<
  ResponsesOf<Operation<P, M>>[Extract<keyof ResponsesOf<Operation<P, M>>, SuccessStatus>]
>;

/** A schema of `components.schemas`, by name (e.g. `Schema<'SendResult'>`). */
export type Schema<Name extends keyof components['schemas']> = components['schemas'][Name];

/** A send's answer: 200 `Sent` (`SendResult`, with `timestamp`) or 202 `Queued` (`QueuedResult`, with `status`). */
export type SendOutcome = Schema<'SendResult'> | Schema<'QueuedResult'>;

/** One entry of the event log: the event's webhook body plus `createdAt` (docs/decisions/0030-event-log.md). */
export type LoggedEvent = Schema<'LoggedEvent'>;

/** An event type name (`Message`, `ReadReceipt`, …; docs/api.md "Webhook events"). */
export type EventType = Schema<'EventType'>;

/** `T` without the key `K`, member by member of a union. */
type OmitEach<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * A webhook request's body: the event as the event log shows it, without `createdAt` (docs/decisions/0030-event-log.md:
 * the log's entries are the webhook bodies plus `createdAt`).
 */
export type WebhookEvent = OmitEach<LoggedEvent, 'createdAt'>;

/** The media kinds `sendMedia` sends, one per `POST /v1/messages/send/{kind}` route. */
export type MediaKind = 'image' | 'document' | 'audio' | 'video' | 'sticker';

/** The body of `POST /v1/messages/send/{kind}` for a media kind. */
export type MediaBody<K extends MediaKind> = JsonBodyOf<Operation<`/v1/messages/send/${K}`, 'post'>>;

/** The body of `POST /v1/messages/send` (a text). */
export type TextBody = JsonBodyOf<Operation<'/v1/messages/send', 'post'>>;

/** The body of `POST /v1/session/connect` (all optional: `subscribe`, `immediate`). */
export type ConnectBody = JsonBodyOf<Operation<'/v1/session/connect', 'post'>>;

/** The body of `POST /v1/webhook` (`webhookUrl`). */
export type WebhookBody = JsonBodyOf<Operation<'/v1/webhook', 'post'>>;
