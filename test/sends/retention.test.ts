import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-05-04T09:00:00.000Z');
const DAY_MS = 86_400_000;

/**
 * Finished send jobs leave the store with the delivery log's retention (src/webhooks/retention.ts), never before a
 * day; a sent job's payload is dropped at once (the message row holds the content); pending jobs stay.
 */
for (const dialect of testDialects()) {
  describe(`send job retention [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect, { env: { WEBHOOK_RETENTION_DAYS: '3' } });
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    const jobs = async () =>
      (
        await t.services.store.db
          .selectFrom('send_jobs')
          .select(['id', 'status', 'payload'])
          .where('instance_id', '=', t.instance.id)
          .orderBy('seq')
          .execute()
      ).map((row) => [row.id, row.status, row.payload === '' ? 'no payload' : 'payload']);

    it('drops a sent job’s payload at once, and finished jobs after the retention; pending ones stay', async () => {
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'sent' });
      assert.equal(sent.status, 200);
      const scheduled = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: 'much later',
        sendAt: new Date(T0 + 20 * DAY_MS).toISOString(),
      });
      assert.equal(scheduled.status, 202);
      const canceled = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: 'withdrawn',
        sendAt: new Date(T0 + DAY_MS).toISOString(),
      });
      const cancel = await t.call('POST', `/v1/messages/${canceled.body.data.id}/cancel`);
      assert.equal(cancel.status, 200);
      assert.deepEqual(await jobs(), [
        [sent.body.data.id, 'sent', 'no payload'],
        [scheduled.body.data.id, 'pending', 'payload'],
        [canceled.body.data.id, 'canceled', 'payload'],
      ]);
      const got = await t.call('GET', `/v1/messages/${sent.body.data.id}`);
      assert.equal(got.body.data.message.conversation, 'sent', 'the message row still shows the content');

      t.clock.advance(2 * DAY_MS);
      await t.services.retention.runOnce();
      assert.equal((await jobs()).length, 3, 'nothing is older than the retention (3 days) yet');
      t.clock.advance(2 * DAY_MS);
      await t.services.retention.runOnce();
      assert.deepEqual(await jobs(), [[scheduled.body.data.id, 'pending', 'payload']]);
      const gone = await t.call('GET', `/v1/messages/${canceled.body.data.id}`);
      assert.equal(gone.status, 404);
    });
  });
}
