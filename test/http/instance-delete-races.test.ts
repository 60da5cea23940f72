import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/** Yields `turns` times to the event loop, so a request started after it interleaves differently. */
async function turns(n: number): Promise<void> {
  for (let k = 0; k < n; k++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * DELETE /v1/instances/{id} while other requests run against the instance (docs/decisions/0029-instances-over-the-api.md:
 * "the session is closed and forgotten in the process"; "the id is 404 instance not found from then on, for every
 * operation").
 */
for (const dialect of testDialects()) {
  describe(`deleting an instance while requests run against it [${dialect}]`, () => {
    let t: TestApp;
    let manage: string;
    before(async () => {
      t = await createTestApp({
        dialect,
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
      manage = await t.newKey({ scopes: ['instances:manage'] });
    });
    after(() => t.close());

    /** Runs `method path` against a fresh instance while it is deleted, the delete started after `delay` turns. */
    async function race(method: 'POST' | 'PUT', path: string, body: unknown, delay: number) {
      const victim = await adminCreateInstance(t.testStore.store.db, { org: t.org.id, env: 'test' });
      const [op, del] = await Promise.all([
        t.call(method, `${path}?from=${victim.id}`, body),
        (async () => {
          await turns(delay);
          return t.call('DELETE', `/v1/instances/${victim.id}`, undefined, {
            authorization: `Bearer ${manage}`,
          });
        })(),
      ]);
      assert.equal(del.status, 200, JSON.stringify(del.body));
      const row = await t.testStore.store.db
        .selectFrom('instances')
        .select('id')
        .where('id', '=', victim.id)
        .executeTakeFirst();
      assert.equal(row, undefined, 'the instance row is gone');
      return { victim, op };
    }

    it('a connect racing the delete leaves no session of the deleted instance in the process', async () => {
      const orphans: string[] = [];
      for (let delay = 0; delay < 12; delay++) {
        const { victim, op } = await race('POST', '/v1/session/connect', {}, delay);
        if (t.services.sessions.existing(victim.id) !== undefined)
          orphans.push(`delay ${delay}: connect ${op.status}`);
      }
      assert.deepEqual(orphans, [], 'sessions left open for deleted instances');
    });

    it('a sandbox scan racing the delete: the delete succeeds and neither answers 500', async () => {
      const failures: string[] = [];
      for (let delay = 0; delay < 20; delay++) {
        const victim = await adminCreateInstance(t.testStore.store.db, { org: t.org.id, env: 'test' });
        const from = `from=${victim.id}`;
        assert.equal((await t.call('POST', `/v1/session/connect?${from}`, {})).status, 200);
        const [scan, del] = await Promise.all([
          t.call('POST', `/v1/sandbox/scan?${from}`, { phone: `55119990${String(delay).padStart(4, '0')}` }),
          (async () => {
            await turns(delay);
            return t.call('DELETE', `/v1/instances/${victim.id}`, undefined, {
              authorization: `Bearer ${manage}`,
            });
          })(),
        ]);
        if (del.status !== 200)
          failures.push(`delay ${delay}: DELETE ${del.status} ${JSON.stringify(del.body)}`);
        if (scan.status >= 500)
          failures.push(`delay ${delay}: scan ${scan.status} ${JSON.stringify(scan.body)}`);
      }
      assert.deepEqual(failures, []);
    });

    for (const [method, path, body] of [
      ['POST', '/v1/calls/settings', { autoReject: true }],
      ['PUT', '/v1/session/pacing', { minIntervalMs: 10 }],
    ] as const) {
      it(`${method} ${path} racing the delete answers 404 instance not found or succeeds, never 500`, async () => {
        const failures: string[] = [];
        for (let delay = 0; delay < 12; delay++) {
          const { op } = await race(method, path, body, delay);
          if (op.status >= 500) failures.push(`delay ${delay}: ${op.status} ${JSON.stringify(op.body)}`);
        }
        assert.deepEqual(failures, []);
      });
    }
  });
}
