/**
 * A 410 from a URL the lane no longer has (docs/decisions/0035-webhook-endpoints.md): the receiver at the old URL
 * answers 410 while the endpoint, or the instance's default webhook, is moved to a new URL, the ordinary way to retire
 * a receiver. The answer says nothing of the new URL: nothing is disabled, no delivery failed, and the delivery is
 * sent again at once to the new URL, its attempt to the old one not counted against it. Before, the endpoint now
 * pointing at the new receiver was disabled and every pending delivery of its lane failed. Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { accepted, createEndpoint, textOf, until } from './endpoint-support.ts';
import { configureWebhook, createWebhookApp, textMessage } from './support.ts';

for (const dialect of testDialects()) {
  describe(`a 410 from the URL a lane left [${dialect}]`, () => {
    let store: TestStore | undefined;
    let t: TestApp | undefined;
    const receivers: Receiver[] = [];
    /** The old receiver's 410, held until the lane has moved. */
    let answerGone: (() => void) | undefined;
    afterEach(async () => {
      answerGone?.();
      await t?.close();
      for (const receiver of receivers.splice(0)) await receiver.close();
      await store?.cleanup();
    });

    /** An app, an old receiver answering 410 once the test lets it, and a new receiver answering 200. */
    const setUp = async () => {
      store = await createTestStore(dialect);
      const app = await createWebhookApp({ dialect, testStore: store });
      t = app;
      const old = await startReceiver({
        respond: () =>
          new Promise((resolve) => {
            answerGone = () => resolve({ status: 410, body: 'gone' });
          }),
      });
      const fresh = await startReceiver();
      receivers.push(old, fresh);
      return { app, old, fresh };
    };

    /** The delivery rows of the instance, oldest first. */
    const rows = (app: TestApp) =>
      app.testStore.store.db
        .selectFrom('webhook_deliveries')
        .select(['status', 'attempts', 'last_error'])
        .where('instance_id', '=', app.instance.id)
        .orderBy('sequence')
        .execute();

    it("an endpoint moved while its old URL's 410 is on the way stays enabled and sends to the new URL", async () => {
      const { app, old, fresh } = await setUp();
      const endpoint = await createEndpoint(app, { url: old.url, events: ['Message'] });
      await app.services.recorder.record(app.instance.id, textMessage('m1'));
      await old.waitForCount(1, 10_000);
      const moved = await app.call('PATCH', `/v1/webhooks/${endpoint.id}`, { url: fresh.url });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      answerGone?.();
      await app.services.recorder.record(app.instance.id, textMessage('m2'));
      await until(app, 'both messages at the new URL', () => accepted(fresh).length === 2);
      assert.deepEqual(accepted(fresh).map(textOf), ['m1', 'm2'], 'in order, each once');
      const view = await app.call('GET', `/v1/webhooks/${endpoint.id}`);
      assert.equal(view.body.data.enabled, true);
      assert.equal(view.body.data.disabledReason ?? null, null);
      await until(app, 'both deliveries recorded', async () =>
        (await rows(app)).every((row) => row.status !== 'pending'),
      );
      assert.deepEqual(
        (await rows(app)).map((row) => [row.status, Number(row.attempts)]),
        [
          ['delivered', 1],
          ['delivered', 1],
        ],
        'the attempt to the old URL not counted against the new one',
      );
    });

    it("a default webhook moved while its old URL's 410 is on the way stays enabled and sends to the new URL", async () => {
      const { app, old, fresh } = await setUp();
      await configureWebhook(app, old.url);
      await app.services.recorder.record(app.instance.id, textMessage('d1'));
      await old.waitForCount(1, 10_000);
      await configureWebhook(app, fresh.url);
      answerGone?.();
      await app.services.recorder.record(app.instance.id, textMessage('d2'));
      await until(app, 'both messages at the new URL', () => accepted(fresh).length === 2);
      assert.deepEqual(accepted(fresh).map(textOf), ['d1', 'd2'], 'in order, each once');
      const config = await app.call('GET', '/v1/webhook');
      assert.equal(config.body.data.disabled, false);
      await until(app, 'both deliveries recorded', async () =>
        (await rows(app)).every((row) => row.status !== 'pending'),
      );
      assert.deepEqual(
        (await rows(app)).map((row) => [row.status, Number(row.attempts)]),
        [
          ['delivered', 1],
          ['delivered', 1],
        ],
        'the attempt to the old URL not counted against the new one',
      );
    });

    it('a 410 from the URL the endpoint still has disables it, as before', async () => {
      const { app, old } = await setUp();
      const endpoint = await createEndpoint(app, { url: old.url, events: ['Message'] });
      await app.services.recorder.record(app.instance.id, textMessage('g1'));
      await old.waitForCount(1, 10_000);
      answerGone?.();
      await until(app, 'the endpoint disabled', async () => {
        const row = await app.testStore.store.db
          .selectFrom('webhook_endpoints')
          .select('enabled')
          .where('id', '=', endpoint.id)
          .executeTakeFirst();
        return Number(row?.enabled) === 0;
      });
      const view = await app.call('GET', `/v1/webhooks/${endpoint.id}`);
      assert.equal(view.body.data.disabledReason, 'receiver answered 410 Gone');
      assert.deepEqual(
        (await rows(app)).map((row) => [row.status, Number(row.attempts), row.last_error]),
        [['failed', 1, 'receiver answered 410 Gone: endpoint disabled']],
      );
    });
  });
}
