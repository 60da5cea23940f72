/**
 * The one-statement read of an instance's routing (src/store/instance-routing.ts, used by the webhook outbox): it
 * answers exactly what the instance read and the endpoint list answer apart, for an unknown instance, an instance
 * without endpoints, and one with several endpoints (a disabled one included, oldest first, another instance's
 * left out). The same read taking the instance's next sequence numbers (one statement on PostgreSQL,
 * docs/decisions/0056-write-groups.md) answers the same routing, numbers without gaps, the webhook's 410 state,
 * and takes nothing for an instance that does not exist. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL
 * is set.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { getInstanceRouting, routeAndAdvance } from '../../src/store/instance-routing.ts';
import { createInstance, getInstance, updateInstance } from '../../src/store/instances.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { insertEndpoint, listEndpoints, updateEndpoint } from '../../src/store/webhook-endpoints.ts';
import { getWebhookState } from '../../src/store/webhook-events.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`instance routing read [${dialect}]`, () => {
    let ts: TestStore;
    let bare: string;
    let routed: string;
    let other: string;

    before(async () => {
      ts = await createTestStore(dialect);
      const db = ts.store.db;
      const org = await createOrganization(db, { name: 'routing', plan: 'pro' });
      bare = (await createInstance(db, { orgId: org.id, env: 'test', name: 'bare' })).id;
      routed = (await createInstance(db, { orgId: org.id, env: 'live', name: 'routed' })).id;
      other = (await createInstance(db, { orgId: org.id, env: 'test', name: 'other' })).id;
      await updateInstance(db, routed, {
        webhookUrl: 'https://hooks.example.com/in',
        subscribe: ['Message', 'ReadReceipt'],
      });
      const endpoint = (instanceId: string, url: string, now: number, events: string[]) =>
        insertEndpoint(
          db,
          {
            id: randomUUID(),
            instanceId,
            url,
            events,
            description: now === 3_000 ? 'third' : null,
            secretSealed: `sealed-${now}`,
            urlSealed: null,
            now,
          },
          10,
        );
      // Inserted in another order than their creation times: the read must follow creation time.
      await endpoint(routed, 'https://b.example.com/2', 2_000, ['Message']);
      await endpoint(routed, 'https://a.example.com/1', 1_000, ['ReadReceipt', 'ChatPresence']);
      await endpoint(routed, 'https://c.example.com/3', 3_000, ['Message']);
      await endpoint(other, 'https://other.example.com/', 1_500, ['Message']);
      const [, second] = await listEndpoints(db, routed);
      assert.ok(second);
      await updateEndpoint(db, routed, second.id, { enabled: false }, 4_000);
    });
    after(() => ts.cleanup());

    it('answers undefined for an instance that does not exist', async () => {
      assert.equal(await getInstanceRouting(ts.store.db, randomUUID()), undefined);
    });

    it('answers the instance row and no endpoints for an instance without any', async () => {
      const routing = await getInstanceRouting(ts.store.db, bare);
      assert.deepEqual(routing, { instance: await getInstance(ts.store.db, bare), endpoints: [] });
    });

    it('answers the instance row and every endpoint of its own, disabled included, oldest first', async () => {
      const db = ts.store.db;
      const routing = await getInstanceRouting(db, routed);
      const endpoints = await listEndpoints(db, routed);
      assert.deepEqual(routing, { instance: await getInstance(db, routed), endpoints });
      assert.deepEqual(
        routing?.endpoints.map((e) => [e.url, e.enabled, e.events, e.description, e.secretSealed]),
        [
          ['https://a.example.com/1', true, ['ReadReceipt', 'ChatPresence'], null, 'sealed-1000'],
          ['https://b.example.com/2', false, ['Message'], null, 'sealed-2000'],
          ['https://c.example.com/3', true, ['Message'], 'third', 'sealed-3000'],
        ],
      );
      assert.equal(routing?.instance.webhookUrl, 'https://hooks.example.com/in');
      assert.deepEqual(routing?.instance.subscribe, ['Message', 'ReadReceipt']);
    });

    it('takes sequence numbers with the routing: the same routing, numbers without gaps, the 410 state', async () => {
      const db = ts.store.db;
      const advance = (id: string, count: number) =>
        db.transaction().execute((trx) => routeAndAdvance(trx, id, count));
      const routing = await getInstanceRouting(db, routed);
      const before = (await getWebhookState(db, routed)).lastSequence;
      assert.deepEqual(await advance(routed, 3), {
        ...routing,
        last: before + 3,
        disabledAt: null,
        disabledReason: null,
      });
      assert.equal((await advance(routed, 2))?.last, before + 5);
      assert.equal((await getWebhookState(db, routed)).lastSequence, before + 5);

      await db
        .updateTable('webhook_state')
        .set({ disabled_at: Date.UTC(2026, 0, 2), disabled_reason: 'receiver answered 410' })
        .where('instance_id', '=', routed)
        .execute();
      const disabled = await advance(routed, 1);
      assert.equal(disabled?.last, before + 6);
      assert.equal(disabled?.disabledAt, '2026-01-02T00:00:00.000Z');
      assert.equal(disabled?.disabledReason, 'receiver answered 410');

      // An instance's first events start its state row at the count.
      assert.deepEqual(await advance(bare, 4), {
        instance: await getInstance(db, bare),
        endpoints: [],
        last: 4,
        disabledAt: null,
        disabledReason: null,
      });
    });

    it('takes no number for an instance that does not exist', async () => {
      const db = ts.store.db;
      const gone = randomUUID();
      assert.equal(await db.transaction().execute((trx) => routeAndAdvance(trx, gone, 2)), undefined);
      const rows = await db
        .selectFrom('webhook_state')
        .select('instance_id')
        .where('instance_id', '=', gone)
        .execute();
      assert.deepEqual(rows, []);
    });
  });
}
