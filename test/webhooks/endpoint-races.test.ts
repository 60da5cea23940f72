import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import pg from 'pg';
import { eventually } from '../support/eventually.ts';
import { startReceiver } from '../support/https-receiver.ts';
import { activityCount } from '../support/pg-activity.ts';
import { TEMPLATE_SCHEMA, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, insertPendingDelivery, textMessage } from './support.ts';

/**
 * Webhook requests that race (docs/decisions/0035-webhook-endpoints.md, 0005-outbox-and-delivery.md): redelivering
 * one event from several requests at once, deleting an endpoint while an event is being recorded with it in its
 * routing, and deliveries left queued to an endpoint that no longer exists.
 */
for (const dialect of testDialects()) {
  describe(`webhook races [${dialect}]`, () => {
    it('several redeliveries of an unsent event at once: each answers 200 or 409, never 500', async () => {
      const receiver = await startReceiver();
      const t = await createWebhookApp({ dialect });
      try {
        // Recorded without a URL: `unsent`, no delivery row; the first redelivery inserts it.
        await t.services.recorder.record(t.instance.id, textMessage('late'));
        const [entry] = (await t.call('GET', '/v1/webhook/deliveries')).body.data.deliveries;
        assert.equal(entry.status, 'unsent');
        await configureWebhook(t, receiver.url);
        const answers = await Promise.all(
          Array.from({ length: 4 }, () => t.call('POST', `/v1/webhook/deliveries/${entry.id}/redeliver`)),
        );
        for (const answer of answers)
          assert.ok([200, 409].includes(answer.status), JSON.stringify(answer.body));
        await receiver.waitForCount(1, 10_000);
        const rows = await t.services.store.db
          .selectFrom('webhook_deliveries')
          .select('endpoint_id')
          .where('event_id', '=', entry.id)
          .execute();
        assert.deepEqual(rows, [{ endpoint_id: '' }], 'one delivery row');
      } finally {
        await t.close();
        await receiver.close();
      }
    });

    it('the retention job deletes deliveries queued to an endpoint that no longer exists, then prunes', async () => {
      const t = await createWebhookApp({ dialect });
      try {
        await t.services.recorder.record(t.instance.id, textMessage('old'));
        const { db } = t.services.store;
        const event = await db
          .selectFrom('webhook_events')
          .select(['id', 'sequence'])
          .executeTakeFirstOrThrow();
        // What a recording transaction that read the routing just before the endpoint's deletion leaves behind.
        const gone = randomUUID();
        await insertPendingDelivery(db, {
          eventId: event.id,
          endpointId: gone,
          instanceId: t.instance.id,
          sequence: Number(event.sequence),
          at: t.clock(),
        });
        t.clock.advance(40 * 86_400_000);
        assert.equal(await t.services.retention.runOnce(), 1, 'the event, once nothing holds it');
        assert.deepEqual(await db.selectFrom('webhook_deliveries').select('event_id').execute(), []);
        assert.deepEqual(await db.selectFrom('webhook_events').select('id').execute(), []);
      } finally {
        await t.close();
      }
    });

    if (dialect === 'postgres') {
      it('deleting an endpoint waits for an event being recorded with it: no delivery to it is left', async () => {
        const receiver = await startReceiver();
        const t = await createWebhookApp({ dialect });
        const blocker = new pg.Client({ connectionString: (t.testStore.database as { url: string }).url });
        await blocker.connect();
        try {
          const created = await t.call('POST', '/v1/webhooks', { url: receiver.url, events: ['Message'] });
          assert.equal(created.status, 201, JSON.stringify(created.body));
          const endpointId: string = created.body.data.id;
          await t.services.recorder.record(t.instance.id, textMessage('first'));
          await receiver.waitForCount(1, 10_000);

          // Holding the instance row stops the next recording transaction at its writes (their foreign keys take
          // a KEY SHARE lock on it), after it advanced the sequence and read the routing with the endpoint in it.
          await blocker.query(`set search_path to ${TEMPLATE_SCHEMA}`);
          await blocker.query('begin');
          await blocker.query('select id from instances where id = $1 for update', [t.instance.id]);
          const recording = t.services.recorder.record(t.instance.id, textMessage('second'));
          /** How many statements of the test's database wait for a lock. */
          const waiting = () =>
            activityCount(blocker, "datname = current_database() and wait_event_type = 'Lock'");
          await eventually('the recorder waits at its writes', async () => (await waiting()) === 1);
          const removing = t.call('DELETE', `/v1/webhooks/${endpointId}`);
          await eventually('the delete waits for the recording', async () => (await waiting()) === 2);
          await blocker.query('rollback');
          await recording;
          const removed = await removing;
          assert.equal(removed.status, 200, JSON.stringify(removed.body));
          const left = await t.services.store.db
            .selectFrom('webhook_deliveries')
            .select(['event_id', 'status'])
            .where('endpoint_id', '=', endpointId)
            .execute();
          // The recorded event may have been sent before the delete took its delivery (it was recorded first); what
          // must not be left is a delivery queued to the deleted endpoint.
          assert.deepEqual(left, [], 'the recorded event’s delivery went with the endpoint');
        } finally {
          await blocker.end().catch(() => undefined);
          await t.close();
          await receiver.close();
        }
      });
    }
  });
}
