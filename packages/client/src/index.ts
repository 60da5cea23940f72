/**
 * @parley/client: a typed client of parley's HTTP API (docs/client.md, docs/decisions/0032-client-library.md).
 * - {@link createParleyClient}: every route typed from parley's OpenAPI document, answers unwrapped from the
 *   envelope, errors raised as {@link ParleyError}, POSTs retried safely with an `Idempotency-Key`.
 * - {@link verifyWebhook}: checks the signatures of a webhook request, the instance webhook's two or a webhook
 *   endpoint's one (docs/decisions/0006-signatures.md, docs/decisions/0035-webhook-endpoints.md).
 * - `client.events()`: the event log as an async iterator (docs/decisions/0030-event-log.md), live events pushed over
 *   the event stream (docs/decisions/0034-client-stream-transport.md) or polled.
 */
export {
  createParleyClient,
  dataUri,
  type EventsPageQuery,
  isParleyError,
  type MethodCall,
  type ParleyClient,
  type ParleyClientOptions,
  type SendOptions,
} from './client.js';
export {
  type CallInfo,
  errorCodeOf,
  ParleyError,
  type ParleyErrorCode,
  ParleyNetworkError,
  ParleyOutcomeUnknownError,
} from './errors.js';
export {
  createPollingTransport,
  type EventBatch,
  type EventReadRequest,
  type EventStream,
  type EventsOptions,
  type EventTransport,
  eventStream,
  type ReadEventPage,
} from './events.js';
export { DEFAULT_RETRY_POLICY, type FetchLike, type RetryPolicy } from './http.js';
export type { components, operations, paths } from './schema.js';
export { type ServerSentEvent, serverSentEvents } from './sse.js';
export { STREAM_IDLE_TIMEOUT_MS } from './stream.js';
export type {
  ApiPath,
  CallArgs,
  CallOptions,
  CallResult,
  ConnectBody,
  EventType,
  HttpMethod,
  LoggedEvent,
  MediaBody,
  MediaKind,
  Operation,
  PathsWith,
  RequestOptions,
  Schema,
  SendOutcome,
  TextBody,
  WebhookBody,
  WebhookEvent,
} from './types.js';
export {
  type HeadersLike,
  type VerifiedWebhook,
  type VerifyWebhookInput,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  WebhookVerificationError,
} from './webhooks.js';
