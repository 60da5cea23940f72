/**
 * The shared parts of the OpenAPI document (src/http/openapi.ts): the response headers, parameters and error
 * responses every operation refers to under `components`, and the tag list in the reference's order.
 */

/** A JSON object of the document. */
export type Json = Record<string, unknown>;

/** A reference to `name` under the document's `components` of `kind`: `{ $ref: '#/components/<kind>/<name>' }`. */
export const ref = (kind: 'schemas' | 'responses' | 'headers' | 'parameters', name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});

/** Shared response headers (components.headers). */
export const HEADERS: Json = {
  RequestId: {
    description:
      'Id of this request: the `x-request-id` the client sent (1 to 64 of `A-Z a-z 0-9 . _ -`) or a generated UUID. The server log lines of the request carry it.',
    schema: { type: 'string', maxLength: 64 },
  },
  RateLimit: {
    description:
      'Requests left in the tightest window and seconds until it resets, e.g. `"minute";r=57;t=42`',
    schema: { type: 'string' },
  },
  RateLimitPolicy: {
    description: 'The organization\'s windows, e.g. `"minute";q=60;w=60, "day";q=1000;w=86400`',
    schema: { type: 'string' },
  },
  RetryAfter: {
    description: 'Whole seconds to wait before retrying',
    schema: { type: 'integer', minimum: 1 },
  },
  IdempotentReplayed: {
    description:
      "`true` when this answer is the one kept for the request's `Idempotency-Key`, answered again: nothing was done this time.",
    schema: { type: 'string', enum: ['true'] },
  },
};

/** Shared request parameters (components.parameters). */
export const PARAMETERS: Json = {
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes a retry safe: the first answer below 500 is kept 24 h per organization and key, and the same request with the same key gets it again (with `Idempotent-Replayed: true`) without being carried out twice. 1 to 255 printable ASCII characters, e.g. a UUID. The same key with another method, path or body is 422; while the first request runs, 409.',
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
    example: '5f0c2a1e-8d4b-4d7e-9c1a-2b3c4d5e6f70',
  },
};

/** One shared error response per status: its component name, description and an example message. */
export const ERROR_RESPONSES: Record<string, { name: string; description: string; example: string }> = {
  '400': {
    name: 'BadRequest',
    description: 'The request is invalid; the message names the field and the rule it breaks.',
    example: 'phone is required',
  },
  '401': {
    name: 'Unauthorized',
    description: 'The API key is missing, malformed, unknown, revoked or expired.',
    example: 'invalid API key',
  },
  '403': {
    name: 'Forbidden',
    description:
      "The API key lacks the scope this operation requires (the message names the scope), or the operation is refused: a group operation by a non-admin, an instance past the plan's cap (the message names the limit).",
    example: 'API key lacks required scope chat:messages',
  },
  '404': {
    name: 'NotFound',
    description:
      'The instance does not exist or this key may not use it, or the group, message, media, delivery or picture the operation names does not exist (sandbox operations: the key is not a test key).',
    example: 'instance not found',
  },
  '409': {
    name: 'Conflict',
    description:
      'The instance is not in the state this operation needs (not logged in, not connected, already logged in, no pairing in progress), or a request with the same `Idempotency-Key` is still running.',
    example: 'instance is not logged in',
  },
  '410': {
    name: 'Gone',
    description:
      "The platform no longer has the media file (the platform's media links expire) and parley kept no copy.",
    example: 'the platform no longer has the media of message 3A6D5E0F9C1B2A3D4E5F60718293A4B5',
  },
  '413': {
    name: 'PayloadTooLarge',
    description:
      "The request body (or the media file) is larger than this operation's limit; the message gives the limit.",
    example: 'request body must be at most 1 MB',
  },
  '414': {
    name: 'UriTooLong',
    description:
      'The URL (path and query) is longer than 8 KB, or a path parameter is longer than 100 characters.',
    example: 'URI too long: the URL must be at most 8 KB',
  },
  '415': {
    name: 'UnsupportedMediaType',
    description: 'The request body is not `application/json`.',
    example: 'Content-Type must be application/json',
  },
  '422': {
    name: 'UnprocessableEntity',
    description:
      'The request is valid but cannot be carried out, e.g. the recipient is not registered on the platform, or its `Idempotency-Key` was used with a different request.',
    example: 'recipient 5511977770000 is not registered on the platform',
  },
  '429': {
    name: 'TooManyRequests',
    description:
      "The organization's rate limit is used up; `Retry-After` (and `error.retryAfter`) says when to retry.",
    example: 'rate limit exceeded',
  },
  '431': {
    name: 'RequestHeaderFieldsTooLarge',
    description: 'The request line and headers together are larger than 16 KB.',
    example: 'request line and headers must be at most 16 KB',
  },
  '500': {
    name: 'InternalError',
    description: 'An unexpected server error; the `x-request-id` header locates it in the server log.',
    example: 'internal error',
  },
  '502': {
    name: 'PlatformError',
    description: 'The messaging platform refused or failed the operation.',
    example: 'the platform refused the request',
  },
  '503': {
    name: 'ServiceUnavailable',
    description:
      'Temporarily unavailable: the platform connection or a media tool is unavailable, the store is not ready, or the server is shutting down. Retry later.',
    example: 'server is shutting down',
  },
  '504': {
    name: 'LoginTimeout',
    description: 'Login was not verified in time.',
    example: 'login was not verified within 10 s',
  },
};

/** The tags, in the order the reference lists them. */
export const TAGS = [
  {
    name: 'instances',
    description:
      "Create, list, rename and delete the organization's instances (one linked number each) in the key's environment; scope instances:manage.",
  },
  {
    name: 'session',
    description: 'Connect an instance, link it by QR code or pairing code, and read its state.',
  },
  {
    name: 'messages',
    description:
      'Send text, media, locations, contacts, polls and reactions; edit and delete sent messages; mark messages read; download received media.',
  },
  {
    name: 'chats',
    description:
      'Chats with their latest message and unread count, stored history, and what the instance shows in a chat (typing, recording, online status).',
  },
  {
    name: 'status',
    description:
      'Post text, image and video status updates (stories) to the contacts the instance knows, or to a list.',
  },
  {
    name: 'labels',
    description:
      "WhatsApp Business labels: the account's labels and the labels on each chat (business accounts only).",
  },
  {
    name: 'calls',
    description: 'Reject incoming calls automatically, with an optional message, or one ringing call.',
  },
  {
    name: 'channels',
    description: 'The WhatsApp channels (newsletters) the account follows; follow and unfollow.',
  },
  { name: 'contacts', description: 'Registration checks, contacts and profiles.' },
  {
    name: 'profile',
    description: "The account's own display name, about text, profile picture and privacy settings.",
  },
  { name: 'groups', description: 'Create groups and read them.' },
  { name: 'webhook', description: 'Where events are delivered, the delivery log and redelivery.' },
  {
    name: 'events',
    description:
      'The event log: every event recorded for an instance, read in sequence order from any point still kept, with or without a webhook; and the event stream, which pushes them as they are recorded (WebSocket or server-sent events).',
  },
  {
    name: 'sandbox',
    description:
      'Test keys only: drive the simulated platform (scan the QR code, receive messages, receipts and presence).',
  },
  {
    name: 'gateway',
    description:
      'The same operations under gateway paths (without /v1): the instance is named by the `x-instance-id` header, and requests are signed when the instance has an HMAC key.',
  },
  { name: 'operations', description: 'Health, readiness and metrics; no API key needed.' },
];
