import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { builtClient, type ClientModule } from '../support/client.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { ENTERPRISE } from '../support/stream-events.ts';

/**
 * The stream transport of `client.events()` (docs/client.md "Event log") against a listening parley whose event log
 * cannot be read (the store's test-only fault hook fails every read of the log): each stream opens, then ends at once
 * with `end` 503. Such openings count as failures, so the loop throws once its retries are spent instead of
 * reconnecting for ever.
 */

for (const dialect of testDialects()) {
  describe(`@parley/client events() when every stream ends at once (${dialect})`, () => {
    let t: TestApp;
    let baseUrl: string;
    let client: ClientModule;
    /** While set, every read of the event log fails as an unreachable store does. */
    let failing = false;
    let opened = 0;

    before(async () => {
      client = (await builtClient()).module;
      const testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (failing && /from "webhook_events"/i.test(sql) && /"sequence" >/i.test(sql)) {
            throw new DomainError('store_unavailable', 'the store is unavailable right now; retry shortly');
          }
        },
      });
      t = await createTestApp({ dialect, plan: ENTERPRISE, testStore });
      baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => t.close());

    it('throws the 503 after its retries, each opening counted', async () => {
      const parley = client.createParleyClient({
        baseUrl,
        apiKey: t.key,
        instance: t.instance.id,
        retries: { retries: 2, minDelayMs: 5, maxDelayMs: 10 },
        fetch: (input: string, init: RequestInit) => {
          // The log is read in pages first (that works); from the first stream on, no read of it does.
          if (input.includes('/v1/events/stream')) {
            opened += 1;
            failing = true;
          }
          return fetch(input, init);
        },
      });
      let outcome: unknown;
      const loop = (async () => {
        for await (const _event of parley.events({ transport: 'stream' }))
          assert.fail('no event is readable');
      })().then(
        () => {
          outcome = 'ended';
        },
        (error: unknown) => {
          outcome = error;
        },
      );
      try {
        await eventually('the loop gave up', () => outcome !== undefined, 15_000);
      } finally {
        failing = false;
      }
      await loop;
      assert.ok(outcome instanceof client.ParleyError, String(outcome));
      assert.equal(outcome.status, 503);
      assert.equal(opened, 3, 'the first opening and two retries');
    });
  });
}
