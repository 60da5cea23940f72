import { type TSchema, Type } from '@sinclair/typebox';
import { EVENT_TYPES, type EventType } from '../store/instances.ts';

/**
 * Shared TypeBox schemas. A property may carry `x-message`, a template for its validation error with
 * `{field}` (the failing field's path), `{parent}` (the array holding an item) and `{value}` (the value given);
 * the error handler uses it instead of the validator's wording (DESIGN D6).
 */

/** The success envelope `{ success: true, code: 200, data }` (SPEC Response envelope). */
export function Envelope<T extends TSchema>(data: T) {
  return Type.Object({ success: Type.Literal(true), code: Type.Literal(200), data });
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

/** Response schemas of a route: its 200 body plus every error status it can answer. */
export function responses<T extends TSchema>(data: T, ...statuses: number[]) {
  const out: Record<number, TSchema> = { 200: Envelope(data) };
  for (const status of [400, 401, 403, 404, 429, 500, ...statuses]) out[status] = Type.Ref('ErrorEnvelope');
  return out;
}

/** Wraps `data` in the success envelope (SPEC Response envelope). */
export function ok<T>(data: T): { success: true; code: 200; data: T } {
  return { success: true, code: 200, data };
}

/** A phone number: digits only, international format, no leading `+`, 8 to 15 digits (SPEC Identifiers, D6). */
export const Phone = (description = 'phone number, international format, digits only') =>
  Type.String({
    pattern: '^[0-9]{8,15}$',
    'x-message': '{field} must be digits only, international format, no leading +',
    description,
    examples: ['5511999990000'],
  });

/** An instance selector: the instance UUID or its linked phone number (SPEC `from`, DESIGN D4). */
export const InstanceSelector = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'instance UUID or the linked phone number; omitted: the most recently connected instance (D4)',
});

/** Query string of every non-send `/v1` operation: `from` selects the instance (DESIGN D4). */
export const InstanceQuery = Type.Object({ from: Type.Optional(InstanceSelector) });

/** An event type name (SPEC Events), rejected with DESIGN D6's message when unknown. */
export const EventTypeName = Type.Unsafe<EventType>({
  type: 'string',
  enum: [...EVENT_TYPES],
  'x-message': `{parent} contains unknown event type {value} (allowed: ${EVENT_TYPES.join(', ')})`,
});

/** `{ details }` results such as `Disconnected` (SPEC Endpoints). */
export const Details = Type.Object({ details: Type.String() });
