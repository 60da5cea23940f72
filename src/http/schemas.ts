import { type TSchema, Type } from '@sinclair/typebox';
import { EVENT_TYPES, type EventType } from '../domain/instance.ts';

/**
 * Shared TypeBox schemas. A property may carry `x-message`, a template for its validation error with
 * `{field}` (the failing field's path), `{parent}` (the array holding an item) and `{value}` (the value given);
 * the error handler uses it instead of the validator's wording (DESIGN D6).
 */

/**
 * The success envelope `{ success: true, code: 200, data }` (SPEC Response envelope). `description` says what
 * the 200 answer means; the OpenAPI document shows it as the response's description.
 */
export function Envelope<T extends TSchema>(data: T, description?: string) {
  return Type.Object(
    { success: Type.Literal(true), code: Type.Literal(200), data },
    description === undefined ? {} : { description },
  );
}

/** The error envelope (SPEC Errors): `retryAfter` (whole seconds) on 429 only. */
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
 * The error statuses every authenticated `/v1` operation can answer: 400 (validation, DESIGN D6), 401 and 403
 * (authentication and scope, D3, D5), 404 (instance not found, D4), 429 (rate limit, D13), 500, and 503 (the
 * server is shutting down, D14). 413 and 415 (body parsing) are added to every operation taking a body by the
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

/** Wraps `data` in the success envelope (SPEC Response envelope). */
export function ok<T>(data: T): { success: true; code: 200; data: T } {
  return { success: true, code: 200, data };
}

/**
 * A phone number: digits only, international format, no leading `+`, 8 to 15 digits (SPEC Identifiers, D6).
 * `example` is the number the OpenAPI document shows (default: a registered sandbox user, not the linked number).
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

/** An instance selector: the instance UUID or its linked phone number (SPEC `from`, DESIGN D4). */
export const InstanceSelector = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'instance UUID or the linked phone number; omitted: the most recently connected instance',
});

/** Query string of every non-send `/v1` operation: `from` selects the instance (DESIGN D4). */
export const InstanceQuery = Type.Object({ from: Type.Optional(InstanceSelector) });

/** An event type name (SPEC Events), rejected with DESIGN D6's message when unknown. */
export const EventTypeName = Type.Unsafe<EventType>({
  title: 'EventType',
  type: 'string',
  enum: [...EVENT_TYPES],
  'x-message': `{parent} contains unknown event type {value} (allowed: ${EVENT_TYPES.join(', ')})`,
});

/** `{ details }` results such as `Disconnected` (SPEC Endpoints). */
export const Details = Type.Object({ details: Type.String() }, { title: 'Details' });
