import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, deliveries, recordMessages, waitForLog } from './support.ts';

for (const dialect of testDialects()) {
  describe(`DELETE /v1/webhook [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    before(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({ dialect });
    });
    after(async () => {
      await t?.close();
      await receiver?.close();
    });

    it('removes the URL: events are logged as unsent, nothing is sent, and they can be redelivered to a new URL', async () => {
      await configureWebhook(t, receiver.url);
      const removed = await t.call('DELETE', '/v1/webhook');
      assert.deepEqual(removed.body, { success: true, code: 200, data: { details: 'Webhook removed' } });
      const config = await t.call('GET', '/v1/webhook');
      assert.equal(config.body.data.webhook, '');
      const row = await t.testStore.store.db
        .selectFrom('instances')
        .select('webhook_url')
        .where('id', '=', t.instance.id)
        .executeTakeFirstOrThrow();
      assert.equal(row.webhook_url, null);

      await recordMessages(t, 1, 'while-removed');
      const [entry] = (await deliveries(t)).body.data.deliveries;
      assert.equal(entry.status, 'unsent', 'recorded for the log, not queued');
      assert.match(entry.reason, /webhook/i);
      assert.equal(receiver.requests.length, 0, 'nothing is sent without a URL');
      const refused = await t.call('POST', `/v1/webhook/deliveries/${entry.id}/redeliver`);
      assert.equal(refused.status, 409, 'no URL to redeliver to');

      await configureWebhook(t, receiver.url);
      const again = await t.call('POST', `/v1/webhook/deliveries/${entry.id}/redeliver`);
      assert.equal(again.status, 200);
      await waitForLog(t, (entries) => entries[0]?.status === 'delivered');
      assert.equal(receiver.requests.length, 1);
      assert.equal(receiver.requests[0]?.headers['webhook-id'], entry.id);
    });
  });
}
