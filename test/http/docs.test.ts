import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';

describe('API reference page at /docs (Scalar, offline)', () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(() => t.close());

  it('serves HTML titled parley that reads /openapi.json and loads nothing from another host', async () => {
    const redirect = await t.app.inject({ url: '/docs' });
    assert.equal(redirect.statusCode, 301);
    assert.equal(redirect.headers.location, '/docs/');
    const page = await t.app.inject({ url: '/docs/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.ok(page.headers['x-request-id']);
    const html = page.body;
    assert.match(html, /<title>parley<\/title>/);
    assert.match(html, /"url": "\/openapi\.json"/);
    assert.match(html, /"withDefaultFonts": false/);
    assert.match(html, /"telemetry": false/);
    assert.doesNotMatch(html, /swagger/i);
    assert.deepEqual(html.match(/https?:\/\/[^\s"'<>)]+/g) ?? [], [], 'no absolute URL in the page');
    const sources = [...html.matchAll(/<(?:script|link|img)\b[^>]*(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(sources, ['js/scalar.js'], 'the one script is served by parley itself');
    assert.doesNotMatch(html, /@import|@font-face|url\(/, 'no style or font fetched from elsewhere');
  });

  it('serves its script locally, and the document it reads', async () => {
    const script = await t.app.inject({ url: '/docs/js/scalar.js' });
    assert.equal(script.statusCode, 200);
    assert.match(String(script.headers['content-type']), /^application\/javascript/);
    assert.ok(script.body.length > 100_000, 'the bundled reference script');
    const document = await t.app.inject({ url: '/openapi.json' });
    assert.equal(document.statusCode, 200);
    assert.equal(document.json().info.title, 'parley');
  });

  it("the plugin's own document paths do not serve a broken copy", async () => {
    const json = await t.app.inject({ url: '/docs/openapi.json' });
    assert.equal(json.statusCode, 301);
    assert.equal(json.headers.location, '/openapi.json');
    const yaml = await t.app.inject({ url: '/docs/openapi.yaml' });
    assert.equal(yaml.statusCode, 404);
    assert.deepEqual(yaml.json(), {
      error: { code: 404, message: 'route GET /docs/openapi.yaml not found' },
    });
  });
});
