import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';

type Json = Record<string, any>;

/**
 * The request-body examples of /openapi.json: client generators and the /docs page show them and send them as
 * they are, so each must be valid for its schema and, where it needs no earlier state, answer 200 on a sandbox
 * instance as written.
 */
describe('OpenAPI request examples', () => {
  let t: TestApp;
  let doc: Json;

  before(async () => {
    t = await createTestApp();
    doc = (await t.app.inject({ url: '/openapi.json' })).json();
    await loginSandbox(t, '5511999990001');
  });
  after(() => t.close());

  /** Every operation with a body: its path, method, operationId, example and schema. */
  function bodies(): { path: string; method: string; id: string; example: unknown; schema: Json }[] {
    const out = [];
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const [method, op] of Object.entries(item as Json)) {
        const json = op.requestBody?.content?.['application/json'];
        if (json) out.push({ path, method, id: op.operationId, example: json.example, schema: json.schema });
      }
    }
    return out;
  }

  it('every request body has an example that its schema accepts', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    const operations = bodies();
    assert.ok(operations.length >= 30, `${operations.length} bodies`);
    for (const { path, method, id, example, schema } of operations) {
      assert.ok(example !== undefined, `${method} ${path} (${id}) has an example`);
      const validate = ajv.compile({ ...schema, components: doc.components });
      assert.ok(validate(example), `${id}: ${JSON.stringify(validate.errors)}`);
    }
  });

  it('no example writes to an unregistered sandbox number (ending in 0000) or names an instance', () => {
    for (const { id, example } of bodies()) {
      // a registration check shows one registered and one unregistered number
      const check = id === 'checkContacts' || id === 'gatewayCheckContacts';
      const text = JSON.stringify(check ? { ...(example as Json), phones: [] } : example);
      assert.doesNotMatch(text, /"\d{4,11}0000"/, id);
      assert.ok(!Object.hasOwn(example as object, 'from'), `${id} leaves from to the key's default instance`);
    }
  });

  it('the gateway text twin says message instead of body', () => {
    assert.deepEqual(doc.paths['/chat/send/text'].post.requestBody.content['application/json'].example, {
      phone: '5511988887777',
      message: 'Hello *world*! Your order has shipped.',
    });
  });

  it('the examples that need no earlier state answer 200 as sent, on a linked sandbox instance', async () => {
    const runnable = [
      'sendText',
      'sendImage',
      'sendDocument',
      'sendSticker',
      'sendLocation',
      'sendContact',
      'checkContacts',
      'createGroup',
      'sandboxInbound',
      'sandboxInboundMedia',
      'sandboxPresence',
      'sandboxDefineUser',
      'sandboxCreateGroup',
      'connectSession',
      'gatewaySendText',
      'gatewayCheckContacts',
      // last: with an HMAC key set, gateway requests must be signed
      'setHmacKey',
    ];
    const byId = new Map(bodies().map((b) => [b.id, b]));
    for (const id of runnable) {
      const operation = byId.get(id);
      assert.ok(operation, id);
      const response = await t.call(
        operation.method.toUpperCase() as 'POST',
        operation.path,
        operation.example as Record<string, unknown>,
        operation.path.startsWith('/v1/') ? {} : { 'x-instance-id': t.instance.id },
      );
      assert.equal(response.status, 200, `${id}: ${JSON.stringify(response.body)}`);
    }
  });
});
