import { GATEWAY_ROUTES, type GatewayRoute } from './paths.ts';
import { SIGNATURE_WINDOW_SECONDS } from './signature.ts';

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const headerParameters = [
  {
    in: 'header',
    name: 'x-instance-id',
    required: true,
    description: 'UUID of the instance the request addresses (replaces `from`)',
    schema: { type: 'string', format: 'uuid' },
    example: '0b9a3c55-6a44-4c7c-9a57-3f0f5d0e8f11',
  },
  {
    in: 'header',
    name: 'x-timestamp',
    required: false,
    description: `Unix seconds; required when the instance has an HMAC key; within ±${SIGNATURE_WINDOW_SECONDS} s of the server`,
    schema: { type: 'string', pattern: '^[0-9]+$' },
    example: '1735732800',
  },
  {
    in: 'header',
    name: 'x-signature',
    required: false,
    description:
      'required when the instance has an HMAC key: lowercase hex HMAC-SHA256(key, `<x-timestamp>.<METHOD>.<path with query>.<raw body>`); each signature is accepted once',
    schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
  },
];

/** The gateway body of a send: no `from` (the header names the instance); the text send says `message`. */
function gatewayBody(requestBody: unknown, route: GatewayRoute): unknown {
  if (!isRecord(requestBody) || !isRecord(requestBody.content)) return requestBody;
  const json = requestBody.content['application/json'];
  if (!isRecord(json) || !isRecord(json.schema) || !isRecord(json.schema.properties)) return requestBody;
  const schema = { ...json.schema };
  const properties: Json = {};
  for (const [name, value] of Object.entries(json.schema.properties)) {
    if (name === 'from') continue;
    if (route.textBody && name === 'body') properties.message = value;
    else properties[name] = value;
  }
  schema.properties = properties;
  if (Array.isArray(schema.required)) {
    schema.required = schema.required
      .filter((name) => name !== 'from')
      .map((name) => (route.textBody && name === 'body' ? 'message' : name));
  }
  if (route.textBody && isRecord(json.example)) {
    const { body, from: _from, ...rest } = json.example;
    json.example = { ...rest, message: body };
  }
  return { ...requestBody, content: { ...requestBody.content, 'application/json': { ...json, schema } } };
}

function capitalized(name: string): string {
  return `${name.charAt(0).toUpperCase()}${name.slice(1)}`;
}

/** The gateway twin of one `/v1` operation object: tag `gateway`, header parameters instead of `from`. */
function gatewayOperation(operation: Json, route: GatewayRoute): Json {
  const parameters = Array.isArray(operation.parameters)
    ? operation.parameters.filter((p) => !(isRecord(p) && p.in === 'query' && p.name === 'from'))
    : [];
  const twinSummary = typeof operation.summary === 'string' ? operation.summary : route.twin;
  const out: Json = {
    ...structuredClone(operation),
    tags: ['gateway'],
    summary: `${twinSummary} (gateway form of ${route.method} ${route.twin})`,
    operationId: `gateway${capitalized(typeof operation.operationId === 'string' ? operation.operationId : route.twin)}`,
    parameters: [...structuredClone(parameters), ...structuredClone(headerParameters)],
  };
  if (operation.requestBody !== undefined) {
    out.requestBody = gatewayBody(structuredClone(operation.requestBody), route);
  }
  return out;
}

/**
 * Documents every gateway path (docs/decisions/0021-gateway-form.md) in `paths` as a copy of its `/v1` twin's
 * operation under tag `gateway`: operationId `gateway` + the twin's (`gatewaySendText`), `x-instance-id` (required),
 * `x-timestamp` and `x-signature` header parameters, and the gateway body (`message` for text, no `from`). Twins not
 * registered are left out. Called by the document builder (src/http/openapi.ts) before schemas are shared.
 */
export function addGatewayPaths(paths: Json): void {
  for (const route of GATEWAY_ROUTES) {
    const twin = paths[route.twin];
    const operation = isRecord(twin) ? twin[route.method.toLowerCase()] : undefined;
    if (!isRecord(operation)) continue;
    const existing = paths[route.path];
    paths[route.path] = {
      ...(isRecord(existing) ? existing : {}),
      [route.method.toLowerCase()]: gatewayOperation(operation, route),
    };
  }
}
