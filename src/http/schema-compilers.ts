import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
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
 * meets a schema with its JSON. A text part's validator also refuses a coerced number that is not finite
 * (`?limit=1e999`), with the error a value past the field's bound gets.
 * @throws Ajv's error when the schema is not valid JSON Schema (at route registration, never per request).
 */
export function validatorFor(schema: unknown, part: ValidatedPart): ValidateFunction {
  ajvs ??= { body: makeAjv(false), text: makeAjv('array') };
  // a boolean schema (`true` takes anything) has no object to key by: compiled as it comes (it costs nothing)
  if (typeof schema !== 'object' || schema === null) return ajvs[part].compile(schema as boolean);
  const key = keyOf(schema);
  const known = validators[part].get(key);
  if (known !== undefined) return known;
  const compiled = ajvs[part].compile(schema);
  // The cache here is the one that is shared: Ajv's own entry (keyed by the object) would keep every object.
  ajvs[part].removeSchema(schema);
  const validate = part === 'text' ? finiteOnly(compiled, schema) : compiled;
  validators[part].set(key, validate);
  return validate;
}

type SchemaNode = Record<string, unknown>;

function isNode(value: unknown): value is SchemaNode {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The error of a number that is not finite at `path` (a JSON pointer), `node` being its schema: the bound it passed
 * (`maximum` for +Infinity, `minimum` for -Infinity, exclusive or not) when the schema has one, else its type, so
 * the message is the one a finite value past that bound gets (the field's `x-message` when it has one).
 */
function nonFiniteIssue(node: SchemaNode, value: number, path: string): ErrorObject {
  const [inclusive, exclusive, comparison] =
    value > 0
      ? (['maximum', 'exclusiveMaximum', '<'] as const)
      : (['minimum', 'exclusiveMinimum', '>'] as const);
  const base = { instancePath: path, schemaPath: '', parentSchema: node, data: value };
  if (typeof node[inclusive] === 'number') {
    const params = { comparison: `${comparison}=`, limit: node[inclusive] };
    return { ...base, keyword: inclusive, params, message: `must be ${params.comparison} ${params.limit}` };
  }
  if (typeof node[exclusive] === 'number') {
    const params = { comparison, limit: node[exclusive] };
    return { ...base, keyword: exclusive, params, message: `must be ${comparison} ${params.limit}` };
  }
  const type = node.type === 'integer' ? 'integer' : 'number';
  return { ...base, keyword: 'type', params: { type }, message: `must be ${type}` };
}

/**
 * The first number in `data` that is not finite, as a validator error. Only a coerced value can be one (JSON has
 * none, and Ajv's type check refuses them), and only in text parts: Ajv coerces "1e999", "Infinity" and
 * "-Infinity" to ±Infinity, skips `minimum`/`maximum` for a number that is not finite, and does not check the
 * coerced value's type again. `node` is the schema at `path`; properties and array items are followed.
 */
function findNonFinite(node: unknown, data: unknown, path: string): ErrorObject | undefined {
  const schema = isNode(node) ? node : {};
  if (typeof data === 'number') return Number.isFinite(data) ? undefined : nonFiniteIssue(schema, data, path);
  if (Array.isArray(data)) {
    for (const [index, item] of data.entries()) {
      const issue = findNonFinite(schema.items, item, `${path}/${index}`);
      if (issue !== undefined) return issue;
    }
    return undefined;
  }
  if (typeof data !== 'object' || data === null) return undefined;
  const properties = isNode(schema.properties) ? schema.properties : {};
  for (const [name, value] of Object.entries(data)) {
    const pointer = `${path}/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const issue = findNonFinite(properties[name], value, pointer);
    if (issue !== undefined) return issue;
  }
  return undefined;
}

/**
 * `validate` (a text part's validator) refusing what coercion made a number that is not finite: `limit=1e999` is
 * the 400 of a value past the field's bound, naming the field (docs/decisions/0001-envelope-and-error-codes.md),
 * not a value the store then refuses. Ajv's `schemaEnv` is kept, so Fastify still gives the root's parent.
 */
function finiteOnly(validate: ValidateFunction, schema: object): ValidateFunction {
  const checked = ((data: unknown, context?: Parameters<ValidateFunction>[1]) => {
    if (!validate(data, context)) {
      checked.errors = validate.errors;
      return false;
    }
    const issue = findNonFinite(schema, data, '');
    checked.errors = issue === undefined ? null : [issue];
    return issue === undefined;
  }) as ValidateFunction;
  checked.schema = validate.schema;
  checked.schemaEnv = validate.schemaEnv;
  return checked;
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
