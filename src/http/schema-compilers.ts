import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

/**
 * The compilers of the app's route schemas: Ajv validators for requests and fast-json-stringify serializers for
 * responses, each compiled once per distinct schema in a process and shared by every app built in it. Building an
 * app compiled about 1,300 schemas (most of them the same error envelope reference under another status), 0.3 s of
 * a core on the 2-core machine; a process builds one app in production, and the tests build hundreds.
 *
 * A compiled function depends on nothing but its schema's JSON (and the app's shared schemas, the same module
 * constants for every app), so the caches are keyed by that text: route files build their response maps at each
 * registration (`responses(…)` in schemas.ts), so equal schemas arrive as new objects. The text of an object
 * seen before is kept beside it (weakly), so a schema object reused across routes is serialised once.
 */

/** The HTTP part a validator checks: bodies never coerce, the text parts (query, params, headers) do. */
export type ValidatedPart = 'body' | 'text';

/**
 * A validator for one HTTP part. Bodies are validated without type coercion (a string is not an array, "true"
 * is not a boolean: docs/decisions/0001-envelope-and-error-codes.md wants the field named, not guessed); query
 * strings and params coerce, since they only carry text. Unknown body fields are dropped; `x-message` carries the
 * messages of docs/decisions/0001-envelope-and-error-codes.md (see schemas.ts).
 */
function makeAjv(coerceTypes: boolean | 'array'): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    useDefaults: true,
    removeAdditional: true,
    allErrors: false,
    verbose: true,
    keywords: ['x-message'],
  });
  addFormats.default(ajv);
  return ajv;
}

const texts = new WeakMap<object, string>();

/** The JSON text of `schema`, the key of both caches (symbol keys, such as TypeBox's `Kind`, are not part of it). */
function keyOf(schema: object): string {
  let text = texts.get(schema);
  if (text === undefined) {
    text = JSON.stringify(schema);
    texts.set(schema, text);
  }
  return text;
}

const validators: Record<ValidatedPart, Map<string, ValidateFunction>> = { body: new Map(), text: new Map() };
let ajvs: Record<ValidatedPart, Ajv> | undefined;

/**
 * The validator of `schema` (a JSON Schema object or boolean) for `part`, compiled the first time this process
 * meets a schema with its JSON.
 * @throws Ajv's error when the schema is not valid JSON Schema (at route registration, never per request).
 */
export function validatorFor(schema: unknown, part: ValidatedPart): ValidateFunction {
  ajvs ??= { body: makeAjv(false), text: makeAjv('array') };
  // a boolean schema (`true` takes anything) has no object to key by: compiled as it comes (it costs nothing)
  if (typeof schema !== 'object' || schema === null) return ajvs[part].compile(schema as boolean);
  const key = keyOf(schema);
  const known = validators[part].get(key);
  if (known !== undefined) return known;
  const validate = ajvs[part].compile(schema);
  // The cache here is the one that is shared: Ajv's own entry (keyed by the object) would keep every object.
  ajvs[part].removeSchema(schema);
  validators[part].set(key, validate);
  return validate;
}

const serializers = new Map<string, (data: unknown) => string>();

/**
 * Fastify's `schemaController.compilersFactory.buildSerializer`: its default (fast-json-stringify through
 * `@fastify/fast-json-stringify-compiler`), with the serializer of each distinct response schema kept for the
 * process. The external schemas are the app's shared ones (`addSchema`: the error envelope, a module constant, the
 * same for every app), which a serializer compiled for one app resolves exactly as for another.
 */
export const buildSharedSerializer: SerializerFactory = (externalSchemas, serializerOptions) => {
  const compile = SerializerSelector()(externalSchemas, serializerOptions);
  return (route) => {
    const schema = route.schema;
    if (typeof schema !== 'object' || schema === null) return compile(route);
    const key = keyOf(schema);
    const known = serializers.get(key);
    if (known !== undefined) return known;
    const serialize = compile(route);
    serializers.set(key, serialize);
    return serialize;
  };
};
