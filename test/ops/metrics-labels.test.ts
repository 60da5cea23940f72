import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTestApp } from '../support/app.ts';

describe('/metrics labels (docs/decisions/0023-operations.md)', () => {
  it('parley_http_request_duration_seconds is labelled by method, route template and status', async () => {
    const t = await createTestApp();
    try {
      await t.call('GET', '/v1/session/status');
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
      assert.match(
        text,
        /parley_http_request_duration_seconds_count\{[^}]*method="GET"[^}]*route="\/v1\/session\/status"[^}]*status="200"[^}]*\} 1/,
      );
    } finally {
      await t.close();
    }
  });
});
