import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import ts from 'typescript';
import { createTestApp, type TestApp } from '../support/app.ts';

const root = resolve(import.meta.dirname, '../..');

/**
 * A client as a user would write it: openapi-fetch typed by the types openapi-typescript generated from the
 * live /openapi.json. It links the sandbox instance (connect, then the sandbox scan) and sends a text.
 */
const CLIENT = `import createClient from 'openapi-fetch';
import type { components, paths } from './schema';

export type SendResult = components['schemas']['SendResult'];

export async function sendHello(baseUrl: string, key: string, instanceId: string) {
  const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${key}\` } });
  const connect = await client.POST('/v1/session/connect', { params: { query: { from: instanceId } } });
  if (connect.error) throw new Error(\`connect: \${connect.error.error.message}\`);
  const scan = await client.POST('/v1/sandbox/scan', {
    params: { query: { from: instanceId } },
    body: { phone: '5511999990001' },
  });
  if (scan.error) throw new Error(\`scan: \${scan.error.error.message}\`);
  const sent = await client.POST('/v1/messages/send', {
    body: { phone: '5511999990002', body: 'hello from a generated client', from: instanceId },
  });
  // 200 Sent by default; 202 Queued only when asked (Prefer: respond-async or sendAt), so narrow on the shape.
  const data = sent.data?.data;
  const result: SendResult | undefined = data && 'timestamp' in data ? data : undefined;
  const status = await client.GET('/v1/session/status', { params: { query: { from: instanceId } } });
  return { status: sent.response.status, body: sent.data, error: sent.error, result, loggedIn: status.data?.data.loggedIn };
}
`;

/** The same client with a mistake the generated types must catch: a send without its required recipient. */
const WRONG_CLIENT = `import createClient from 'openapi-fetch';
import type { paths } from './schema';

export async function broken(baseUrl: string) {
  const client = createClient<paths>({ baseUrl });
  return client.POST('/v1/messages/send', { body: { body: 'no recipient' } });
}
`;

/** Type-checks `file` as a strict TypeScript program; returns its diagnostics as text (empty when it compiles). */
function typeCheck(file: string): string[] {
  const program = ts.createProgram({
    rootNames: [file],
    options: {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      types: [],
      skipLibCheck: true,
    },
  });
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

describe('a TypeScript client generated from /openapi.json (openapi-typescript + openapi-fetch)', () => {
  let t: TestApp;
  let baseUrl: string;
  let dir: string;

  before(async () => {
    t = await createTestApp();
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    dir = mkdtempSync(join(tmpdir(), 'parley-client-'));
    // The client's imports (openapi-fetch) resolve from the project's own packages.
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const document = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as OpenAPI3;
    writeFileSync(join(dir, 'schema.d.ts'), astToString(await openapiTS(document)));
    writeFileSync(join(dir, 'client.ts'), CLIENT);
    writeFileSync(join(dir, 'wrong.ts'), WRONG_CLIENT);
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('compiles under strict TypeScript, and the types catch a missing required field', () => {
    assert.deepEqual(typeCheck(join(dir, 'client.ts')), []);
    const wrong = typeCheck(join(dir, 'wrong.ts'));
    assert.equal(wrong.length, 1, wrong.join('\n'));
    assert.match(wrong[0] ?? '', /phone/);
  });

  it('connects, links the sandbox instance and sends a text over a real socket', async () => {
    const module = (await import(pathToFileURL(join(dir, 'client.ts')).href)) as {
      sendHello(baseUrl: string, key: string, instanceId: string): Promise<Record<string, unknown>>;
    };
    const sent = await module.sendHello(baseUrl, t.key, t.instance.id);
    assert.equal(sent.status, 200, JSON.stringify(sent.error));
    const body = sent.body as {
      success: true;
      code: 200;
      data: { details: string; id: string; timestamp: string };
    };
    assert.equal(body.success, true);
    assert.equal(body.code, 200);
    assert.equal(body.data.details, 'Sent');
    assert.match(body.data.id, /^[0-9A-F]{16,}$/i);
    assert.match(body.data.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    assert.deepEqual(sent.result, body.data);
    assert.equal(sent.loggedIn, true);
    const stored = await t.testStore.store.db
      .selectFrom('messages')
      .selectAll()
      .where('instance_id', '=', t.instance.id)
      .where('id', '=', body.data.id)
      .execute();
    assert.equal(stored.length, 1, 'the message the client sent is stored');
  });
});
