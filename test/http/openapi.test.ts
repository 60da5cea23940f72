import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { createTestApp, type TestApp } from '../support/app.ts';

type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

function operations(doc: Json): { path: string; method: string; op: Json }[] {
  const out: { path: string; method: string; op: Json }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const method of METHODS) if (item[method]) out.push({ path, method, op: item[method] });
  }
  return out;
}

/** Every `description` and `summary` string anywhere in the document, with where it is. */
function texts(node: unknown, at = '#'): [string, string][] {
  if (Array.isArray(node)) return node.flatMap((item, i) => texts(item, `${at}/${i}`));
  if (node === null || typeof node !== 'object') return [];
  const out: [string, string][] = [];
  for (const [key, value] of Object.entries(node)) {
    if ((key === 'description' || key === 'summary') && typeof value === 'string')
      out.push([`${at}/${key}`, value]);
    else out.push(...texts(value, `${at}/${key}`));
  }
  return out;
}

describe('OpenAPI document fit for readers and client generators', () => {
  let t: TestApp;
  let doc: Json;
  let source: string;

  before(async () => {
    t = await createTestApp({ env: { PUBLIC_URL: 'https://parley.acme.test' } });
    const response = await t.app.inject({ url: '/openapi.json' });
    assert.equal(response.statusCode, 200);
    source = response.body;
    doc = response.json();
  });
  after(() => t.close());

  it("passes Redocly's recommended ruleset with no errors (and only the accepted warnings)", async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({
      source,
      absoluteRef: 'http://parley.acme.test/openapi.json',
      config,
    });
    const errors = problems.filter((p) => p.severity === 'error');
    assert.deepEqual(
      errors.map((p) => `${p.ruleId} ${p.message} at ${p.location[0]?.pointer}`),
      [],
      'lint errors',
    );
    // Every operation documents at least the URL and header limits (414, 431), /healthz included.
    const warnings = problems
      .filter((p) => p.severity === 'warn')
      .map((p) => `${p.ruleId} ${p.location[0]?.pointer}`)
      .sort();
    assert.deepEqual(warnings, []);
  });

  it('servers come from the configured public URL; the license is stated', () => {
    assert.deepEqual(doc.servers, [{ url: 'https://parley.acme.test', description: 'this parley server' }]);
    assert.equal(doc.info.title, 'parley');
    assert.equal(doc.info.license.identifier, 'MIT');
  });

  it('every operation has a unique camelCase operationId; gateway twins have their own', () => {
    const ids = operations(doc).map(({ op }) => op.operationId);
    for (const id of ids) assert.match(String(id), /^[a-z][A-Za-z0-9]*$/);
    assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    const byRoute = (path: string, method: string) => doc.paths[path][method].operationId;
    assert.equal(byRoute('/v1/messages/send', 'post'), 'sendText');
    assert.equal(byRoute('/v1/messages/send/image', 'post'), 'sendImage');
    assert.equal(byRoute('/v1/session/status', 'get'), 'getSessionStatus');
    assert.equal(byRoute('/v1/session/connect', 'post'), 'connectSession');
    assert.equal(byRoute('/v1/contacts/check', 'post'), 'checkContacts');
    assert.equal(byRoute('/v1/contacts/lid', 'get'), 'getContactLid');
    assert.equal(byRoute('/v1/groups/list', 'get'), 'listGroups');
    assert.equal(byRoute('/v1/profile', 'get'), 'getProfile');
    assert.equal(byRoute('/v1/profile', 'put'), 'updateProfile');
    assert.equal(byRoute('/v1/profile/privacy', 'put'), 'updatePrivacySettings');
    assert.equal(byRoute('/v1/contacts/blocklist', 'get'), 'getBlocklist');
    assert.equal(byRoute('/v1/contacts/block', 'post'), 'blockContact');
    assert.equal(byRoute('/v1/chats/{jid}/archive', 'post'), 'archiveChat');
    assert.equal(byRoute('/v1/chats/{jid}/mute', 'post'), 'muteChat');
    assert.equal(byRoute('/v1/chats/{jid}/mark-unread', 'post'), 'markChatUnread');
    assert.equal(byRoute('/v1/messages/{id}/star', 'post'), 'starMessage');
    assert.equal(byRoute('/v1/labels', 'get'), 'listLabels');
    assert.equal(byRoute('/v1/labels/{id}', 'patch'), 'updateLabel');
    assert.equal(byRoute('/v1/chats/{jid}/labels', 'put'), 'setChatLabels');
    assert.equal(byRoute('/v1/chats/{jid}/labels/{labelId}', 'delete'), 'removeChatLabel');
    assert.equal(byRoute('/v1/events', 'get'), 'listEvents');
    assert.equal(byRoute('/v1/events/stream', 'get'), 'streamEvents');
    assert.equal(byRoute('/chat/send/text', 'post'), 'gatewaySendText');
    assert.equal(byRoute('/session/status', 'get'), 'gatewayGetSessionStatus');
  });

  it('every response has a real description; errors reference the shared error responses', () => {
    for (const { path, method, op } of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses as Json)) {
        const resolved = response.$ref ? doc.components.responses[response.$ref.split('/').pop()] : response;
        assert.ok(resolved, `${method} ${path} ${status} resolves`);
        assert.ok(
          resolved.description && resolved.description !== 'Default Response',
          `${method} ${path} ${status}`,
        );
        if (Number(status) >= 400) {
          assert.match(String(response.$ref), /^#\/components\/responses\//, `${method} ${path} ${status}`);
          assert.deepEqual(resolved.content['application/json'].schema, {
            $ref: '#/components/schemas/ErrorEnvelope',
          });
          assert.equal(resolved.content['application/json'].example.error.code, Number(status));
        }
      }
    }
  });

  it('every status each route can return is documented', () => {
    for (const { path, method, op } of operations(doc)) {
      const statuses = Object.keys(op.responses);
      const secured = (op.security ?? doc.security).length > 0;
      if (secured) {
        for (const s of ['400', '401', '403', '404', '429', '500', '503'])
          assert.ok(statuses.includes(s), `${method} ${path} documents ${s}`);
      }
      if (method !== 'get') {
        for (const s of ['413', '415']) assert.ok(statuses.includes(s), `${method} ${path} documents ${s}`);
      }
    }
    const has = (path: string, method: string, ...statuses: string[]) => {
      for (const s of statuses) assert.ok(doc.paths[path][method].responses[s], `${method} ${path} ${s}`);
    };
    has('/v1/messages/send', 'post', '409', '422', '502');
    has('/v1/messages/send/image', 'post', '409', '413', '422', '502');
    has('/chat/send/text', 'post', '409', '422', '502');
    has('/v1/session/connect', 'post', '409', '502', '504');
    has('/v1/contacts/check', 'post', '409', '502');
    has('/v1/contacts/lid', 'get', '200', '400', '404', '502');
    has('/v1/profile', 'put', '409', '413', '502');
    has('/v1/contacts/block', 'post', '409', '422', '502');
    has('/v1/chats/{jid}/pin', 'post', '400', '404', '409', '502');
    has('/v1/chats/{jid}/mute', 'post', '400', '409', '502');
    has('/v1/messages/{id}/unstar', 'post', '404', '409', '502');
    has('/v1/webhook/deliveries/{id}/redeliver', 'post', '404', '409', '414', '431');
    // Webhook endpoints (docs/decisions/0035-webhook-endpoints.md): 201 with the secret, 409 at the cap, 404 per id.
    has('/v1/webhooks', 'post', '201', '400', '409');
    has('/v1/webhooks', 'get', '200');
    for (const method of ['get', 'patch', 'delete']) has('/v1/webhooks/{id}', method, '200', '404');
    has('/v1/webhooks/{id}/rotate-secret', 'post', '200', '404');
    has('/v1/webhooks/{id}/deliveries', 'get', '200', '404');
    has('/v1/webhooks/{id}/deliveries/{eventId}/redeliver', 'post', '200', '404', '409');
    has('/healthz', 'get', '414', '431');
    has('/readyz', 'get', '503');
    assert.deepEqual(doc.components.responses.TooManyRequests.headers['retry-after'], {
      $ref: '#/components/headers/RetryAfter',
    });
  });

  it('every authenticated POST, gateway paths included, takes Idempotency-Key and lists 409 and 422', () => {
    const posts = operations(doc).filter(
      ({ method, op }) => method === 'post' && (op.security ?? doc.security).length > 0,
    );
    assert.ok(posts.some(({ path }) => path === '/chat/send/text'));
    for (const { path, op } of posts) {
      assert.ok(
        op.parameters.some((p: Json) => p.$ref === '#/components/parameters/IdempotencyKey'),
        `POST ${path} takes Idempotency-Key`,
      );
      for (const s of ['409', '422']) assert.ok(op.responses[s], `POST ${path} documents ${s}`);
      // Every success answer may be a kept one: 200, and 201 for a creation, 202 for a queued send.
      const successes = Object.keys(op.responses).filter((status) => /^2\d\d$/.test(status));
      assert.ok(successes.length > 0, `POST ${path} documents a success`);
      for (const status of successes) {
        assert.deepEqual(
          op.responses[status].headers['idempotent-replayed'],
          { $ref: '#/components/headers/IdempotentReplayed' },
          `POST ${path} ${status}`,
        );
      }
    }
    for (const { method, op } of operations(doc).filter(({ method }) => method !== 'post')) {
      assert.ok(!JSON.stringify(op.parameters ?? []).includes('IdempotencyKey'), `${method} takes no key`);
    }
    assert.equal(doc.components.parameters.IdempotencyKey.name, 'Idempotency-Key');
    assert.equal(doc.components.parameters.IdempotencyKey.schema.maxLength, 255);
  });

  it('shared schemas live under components and are referenced, not copied', () => {
    const schemas = doc.components.schemas;
    for (const name of [
      'SendResult',
      'ConnectResult',
      'DeliveryEntry',
      'EventsPage',
      'LoggedEvent',
      'GroupDetails',
      'EventType',
      'ErrorEnvelope',
    ])
      assert.ok(schemas[name], `components.schemas.${name}`);
    const data = (path: string, method: string) =>
      doc.paths[path][method].responses['200'].content['application/json'].schema.properties.data;
    assert.deepEqual(data('/v1/messages/send', 'post'), { $ref: '#/components/schemas/SendResult' });
    assert.deepEqual(data('/chat/send/text', 'post'), { $ref: '#/components/schemas/SendResult' });
    assert.deepEqual(data('/v1/messages/send/image', 'post'), { $ref: '#/components/schemas/SendResult' });
    // Request bodies stay inline (generators read a defaulted property as optional only there); the shared
    // schemas inside them are referenced.
    const connect = doc.paths['/v1/session/connect'].post.requestBody.content['application/json'].schema;
    assert.equal(connect.type, 'object');
    assert.deepEqual(connect.properties.subscribe.items, { $ref: '#/components/schemas/EventType' });
    const counts = new Map<string, number>();
    const walk = (node: unknown): void => {
      if (node === null || typeof node !== 'object') return;
      const title = (node as Json).title;
      if (!Array.isArray(node) && typeof title === 'string') counts.set(title, (counts.get(title) ?? 0) + 1);
      for (const child of Object.values(node)) walk(child);
    };
    walk(doc);
    for (const [title, count] of counts) assert.equal(count, 1, `schema ${title} is written once`);
    assert.ok(!source.includes('x-message'), 'validator templates are not published');
  });

  it('webhook endpoints (docs/decisions/0035-webhook-endpoints.md): the secret only in the create and rotate answers', () => {
    const data = (path: string, method: string, status: string) => {
      const schema = doc.paths[path][method].responses[status].content['application/json'].schema;
      const ref: string | undefined = schema.properties.data.$ref;
      return ref === undefined ? schema.properties.data : doc.components.schemas[ref.split('/').pop() ?? ''];
    };
    const created = data('/v1/webhooks', 'post', '201');
    assert.ok(created.required.includes('secret'));
    assert.ok(data('/v1/webhooks/{id}/rotate-secret', 'post', '200').required.includes('secret'));
    for (const [path, method] of [
      ['/v1/webhooks/{id}', 'get'],
      ['/v1/webhooks/{id}', 'patch'],
    ] as const) {
      assert.equal(data(path, method, '200').properties.secret, undefined, `${method} ${path}`);
    }
    const body = doc.paths['/v1/webhooks'].post.requestBody.content['application/json'].schema;
    const resolved = body.$ref === undefined ? body : doc.components.schemas[body.$ref.split('/').pop()];
    assert.deepEqual(resolved.required, ['url', 'events']);
  });

  it('the event log (docs/decisions/0030-event-log.md): its query, its entries in webhook-body shape, no gateway twin', () => {
    const op = doc.paths['/v1/events'].get;
    assert.deepEqual(op.tags, ['events']);
    const params: Json = Object.fromEntries((op.parameters as Json[]).map((p) => [p.name, p]));
    assert.deepEqual(Object.keys(params).sort(), ['after', 'from', 'limit', 'types']);
    for (const param of Object.values(params) as Json[]) assert.equal(param.in, 'query');
    assert.deepEqual(params.after.schema, {
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      default: 0,
      type: 'integer',
    });
    assert.deepEqual(params.limit.schema, { minimum: 1, maximum: 1000, default: 100, type: 'integer' });
    assert.equal(params.types.schema.type, 'string');
    assert.deepEqual(op.responses['200'].content['application/json'].schema.properties.data, {
      $ref: '#/components/schemas/EventsPage',
    });
    const schemas = doc.components.schemas;
    assert.deepEqual(schemas.EventsPage.properties.events.items, {
      $ref: '#/components/schemas/LoggedEvent',
    });
    assert.deepEqual(schemas.EventsPage.required, ['events', 'next']);
    assert.deepEqual(schemas.LoggedEvent.anyOf, [
      { $ref: '#/components/schemas/LoggedReceipt' },
      { $ref: '#/components/schemas/LoggedOther' },
    ]);
    // Key order of the webhook body (docs/decisions/0018-webhook-events-and-payloads.md), every key required.
    assert.deepEqual(schemas.LoggedReceipt.required, [
      'type',
      'state',
      'event',
      'instanceId',
      'sequence',
      'createdAt',
    ]);
    assert.deepEqual(schemas.LoggedOther.required, ['type', 'event', 'instanceId', 'sequence', 'createdAt']);
    assert.deepEqual(
      [...schemas.LoggedReceipt.properties.type.enum, ...schemas.LoggedOther.properties.type.enum].sort(),
      [...schemas.EventType.enum].sort(),
      'the two entry shapes cover every event type once',
    );
    // The gateway form serves the contract's paths only (docs/decisions/0021-gateway-form.md).
    assert.equal(doc.paths['/events'], undefined);
  });

  it('the instances routes (docs/decisions/0029-instances-over-the-api.md): tag, operations, 201 on create', () => {
    const ops = operations(doc).filter(({ path }) => path.startsWith('/v1/instances'));
    assert.deepEqual(
      ops.map(({ path, method, op }) => `${method} ${path} ${op.operationId} ${op.tags.join()}`).sort(),
      [
        'delete /v1/instances/{id} deleteInstance instances',
        'get /v1/instances listInstances instances',
        'get /v1/instances/{id} getInstance instances',
        'patch /v1/instances/{id} updateInstance instances',
        'post /v1/instances createInstance instances',
      ],
    );
    const create = doc.paths['/v1/instances'].post;
    assert.equal(create.responses['200'], undefined, 'a creation answers 201, not 200');
    const body = create.responses['201'].content['application/json'].schema;
    assert.deepEqual(body.properties.code, { type: 'number', enum: [201] });
    assert.deepEqual(body.properties.data, { $ref: '#/components/schemas/InstanceView' });
    assert.deepEqual(create.requestBody.content['application/json'].example, { name: 'sales' });
    assert.deepEqual(doc.components.schemas.InstanceView.required.sort(), [
      'createdAt',
      'env',
      'id',
      'lastConnectedAt',
      'name',
      'phone',
      'webhook',
    ]);
    for (const method of ['get', 'patch', 'delete']) {
      const op = doc.paths['/v1/instances/{id}'][method];
      assert.deepEqual(
        op.parameters.find((p: Json) => p.in === 'path'),
        {
          schema: { type: 'string', maxLength: 100 },
          in: 'path',
          name: 'id',
          required: true,
          description: 'the instance UUID',
        },
      );
      assert.deepEqual(op.responses['404'], { $ref: '#/components/responses/NotFound' });
    }
    assert.ok(!Object.keys(doc.paths).some((path) => path.startsWith('/instances')), 'no gateway twin');
  });

  it('the event stream (docs/decisions/0031-event-stream.md): its query and Last-Event-ID, both forms, no gateway twin', () => {
    const op = doc.paths['/v1/events/stream'].get;
    assert.deepEqual(op.tags, ['events']);
    assert.equal(doc.paths['/v1/events/stream'].head, undefined, 'HEAD can neither stream nor upgrade');
    const params: Json = Object.fromEntries((op.parameters as Json[]).map((p) => [p.name, p]));
    assert.deepEqual(Object.keys(params).sort(), ['after', 'from', 'last-event-id', 'types']);
    assert.deepEqual(
      Object.values(params).map((p: Json) => [p.name, p.in]),
      [
        ['from', 'query'],
        ['after', 'query'],
        ['types', 'query'],
        ['last-event-id', 'header'],
      ],
    );
    assert.deepEqual(params.after.schema, doc.paths['/v1/events'].get.parameters[1].schema);
    assert.match(op.responses['101'].description, /^WebSocket/);
    assert.equal(op.responses['101'].content, undefined, 'a 101 has no body');
    assert.equal(op.responses['200'].content['text/event-stream'].schema.type, 'string');
    assert.deepEqual(Object.keys(op.responses['200'].content), ['text/event-stream']);
    assert.equal(doc.paths['/events/stream'], undefined);
  });

  it("connect's optional body is not required; a body with required fields is", () => {
    assert.equal(doc.paths['/v1/session/connect'].post.requestBody.required, false);
    assert.equal(doc.paths['/session/connect'].post.requestBody.required, false);
    assert.equal(doc.paths['/v1/messages/send'].post.requestBody.required, true);
  });

  it('descriptions and summaries cite no internal notes', () => {
    const internal = texts(doc).filter(([, text]) =>
      /\bDESIGN\b|\bSPEC\b|\bD\d{1,2}\b|issue #?\d/i.test(text),
    );
    assert.deepEqual(internal, []);
  });

  it('every operation has a summary and a declared tag', () => {
    const declared = new Set((doc.tags as Json[]).map((tag) => tag.name));
    for (const { path, method, op } of operations(doc)) {
      assert.ok(op.summary, `${method} ${path} summary`);
      assert.equal(op.tags.length, 1, `${method} ${path} has one tag`);
      assert.ok(declared.has(op.tags[0]), `${method} ${path} tag ${op.tags[0]} declared`);
    }
    for (const tag of doc.tags as Json[]) assert.ok(tag.description, `tag ${tag.name} described`);
  });

  it("building the document leaves the validators' message templates in place", async () => {
    await t.app.inject({ url: '/openapi.json' });
    const send = await t.call('POST', '/v1/messages/send', { phone: '+5511', body: 'x' });
    assert.deepEqual(send.body, {
      error: { code: 400, message: 'phone must be digits only, international format, no leading +' },
    });
    const connect = await t.call('POST', '/v1/session/connect', { subscribe: ['Nope'] });
    assert.deepEqual(connect.body, {
      error: {
        code: 400,
        message:
          'subscribe contains unknown event type Nope (allowed: Message, ReadReceipt, HistorySync, ChatPresence, MessageUpdate, GroupUpdate, Call, PollVote, SessionStatus, MessageStatus)',
      },
    });
  });
});
