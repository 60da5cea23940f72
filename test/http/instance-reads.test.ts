import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KyselyPlugin } from 'kysely';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The instance a request addresses is read once, by the instance plugin, and handed to the service as an `Instance`
 * (docs/architecture.md, One send request). Reads of the `instances` table are counted through a Kysely plugin; the
 * recorder's projections, which read the instance inside their own transaction for the webhook row, are not the
 * request's and are left out (their stack runs through src/events).
 */
for (const dialect of testDialects()) {
  describe(`one instance read per request [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    let counting = false;
    let reads = 0;
    const counter: KyselyPlugin = {
      transformQuery(args) {
        const node = args.node;
        if (
          counting &&
          node.kind === 'SelectQueryNode' &&
          JSON.stringify(node.from ?? {}).includes('"instances"')
        ) {
          if (!(new Error().stack ?? '').includes('/src/events/')) reads += 1;
        }
        return node;
      },
      transformResult: async (args) => args.result,
    };

    before(async () => {
      testStore = await createTestStore(dialect);
      const store = { ...testStore.store, db: testStore.store.db.withPlugin(counter) };
      t = await createTestApp({ testStore: { ...testStore, store } });
      await loginSandbox(t);
    });
    after(async () => {
      await t.close();
      await testStore.cleanup();
    });

    async function readsDuring(run: () => Promise<{ status: number }>): Promise<number> {
      reads = 0;
      counting = true;
      try {
        assert.equal((await run()).status, 200);
      } finally {
        counting = false;
      }
      return reads;
    }

    it('a send reads its instance once', async () => {
      const reads = await readsDuring(() =>
        t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'hi' }),
      );
      assert.equal(reads, 1);
    });

    it('a session status and a webhook read read it once', async () => {
      assert.equal(await readsDuring(() => t.call('GET', '/v1/session/status')), 1);
      assert.equal(await readsDuring(() => t.call('GET', '/v1/webhook')), 1);
    });
  });
}
