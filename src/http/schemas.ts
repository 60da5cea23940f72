import { type TSchema, Type } from '@sinclair/typebox';
import { EVENT_TYPES, type EventType } from '../domain/instance.ts';

/**
 * Shared TypeBox schemas. A property may carry `x-message`, a template for its validation error with
 * `{field}` (the failing field's path), `{parent}` (the array holding an item) and `{value}` (the value given);
 * the error handler uses it instead of the validator's wording (docs/decisions/0001-envelope-and-error-codes.md).
 */

/**
 * The success envelope `{ success: true, code: 200, data }` (docs/api.md#conventions). `description` says what
 * the 200 answer means; the OpenAPI document shows it as the response's description.
 */
export function Envelope<T extends TSchema>(data: T, description?: string) {
  return Type.Object(
    { success: Type.Literal(true), code: Type.Literal(200), data },
    description === undefined ? {} : { description },
  );
}

/** The error envelope (docs/api.md#errors): `retryAfter` (whole seconds) on 429 only. */
export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      code: Type.Integer({ examples: [400] }),
      message: Type.String({ examples: ['phone is required'] }),
      retryAfter: Type.Optional(Type.Integer({ minimum: 1 })),
    }),
  },
  { $id: 'ErrorEnvelope', title: 'Error' },
);

/**
 * The error statuses every authenticated `/v1` operation can answer: 400 (validation,
 * docs/decisions/0001-envelope-and-error-codes.md), 401 and 403 (authentication and scope,
 * docs/decisions/0003-scopes-and-keys.md), 404 (instance not found, docs/decisions/0002-instance-resolution.md), 429
 * (rate limit, docs/decisions/0019-rate-limits-and-plans.md), 500, and 503 (the server is shutting down,
 * docs/decisions/0023-operations.md). 413 and 415 (body parsing) are added to every operation taking a body by the
 * OpenAPI document builder (src/http/openapi.ts).
 */
export const COMMON_ERROR_STATUSES = [400, 401, 403, 404, 429, 500, 503] as const;

/**
 * Response schemas of an authenticated route: its 200 body (the success envelope, described by
 * `description`) plus the common error statuses and the route's own (`statuses`: 409, 422, 502, 504…), each
 * the shared error envelope.
 */
export function responses<T extends TSchema>(description: string, data: T, ...statuses: number[]) {
  const out: Record<number, TSchema> = { 200: Envelope(data, description) };
  for (const status of new Set([...COMMON_ERROR_STATUSES, ...statuses]))
    out[status] = Type.Ref('ErrorEnvelope');
  return out;
}

/**
 * Response schemas of an authenticated route that creates something: its 201 body
 * (`{ success: true, code: 201, data }`, described by `description`; `code` equals the HTTP status,
 * docs/decisions/0001-envelope-and-error-codes.md) plus the common error statuses and the route's own.
 */
export function createdResponses<T extends TSchema>(description: string, data: T, ...statuses: number[]) {
  const out: Record<number, TSchema> = {
    201: Type.Object({ success: Type.Literal(true), code: Type.Literal(201), data }, { description }),
  };
  for (const status of new Set([...COMMON_ERROR_STATUSES, ...statuses]))
    out[status] = Type.Ref('ErrorEnvelope');
  return out;
}

/** Wraps `data` in the 201 envelope of a creation (docs/api.md#conventions); the route sets the status. */
export function created<T>(data: T): { success: true; code: 201; data: T } {
  return { success: true, code: 201, data };
}

/** Wraps `data` in the success envelope (docs/api.md#conventions). */
export function ok<T>(data: T): { success: true; code: 200; data: T } {
  return { success: true, code: 200, data };
}

/**
 * A phone number: digits only, international format, no leading `+`, 8 to 15 digits (docs/api.md#conventions,
 * docs/decisions/0001-envelope-and-error-codes.md). `example` is the number the OpenAPI document shows (default: a
 * registered sandbox user, not the linked number).
 */
export const Phone = (
  description = 'phone number, international format, digits only',
  example = '5511988887777',
) =>
  Type.String({
    pattern: '^[0-9]{8,15}$',
    'x-message': '{field} must be digits only, international format, no leading +',
    description,
    examples: [example],
  });

/**
 * An instance selector: the instance UUID or its linked phone number (docs/decisions/0002-instance-resolution.md).
 */
export const InstanceSelector = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'instance UUID or the linked phone number; omitted: the most recently connected instance',
});

/**
 * Query string of every non-send `/v1` operation: `from` selects the instance
 * (docs/decisions/0002-instance-resolution.md).
 */
export const InstanceQuery = Type.Object({ from: Type.Optional(InstanceSelector) });

/**
 * An event type name (docs/api.md#webhook-events), rejected with the message of
 * docs/decisions/0001-envelope-and-error-codes.md when unknown.
 */
export const EventTypeName = Type.Unsafe<EventType>({
  title: 'EventType',
  type: 'string',
  enum: [...EVENT_TYPES],
  'x-message': `{parent} contains unknown event type {value} (allowed: ${EVENT_TYPES.join(', ')})`,
});

/** `{ details }` results such as `Disconnected` (docs/api.md). */
export const Details = Type.Object({ details: Type.String() }, { title: 'Details' });
