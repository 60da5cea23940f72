/**
 * An instance's routing as the webhook outbox gets it with its sequence numbers (src/store/instance-routing.ts): it
 * answers exactly what the instance read and the endpoint list answer apart, for an unknown instance, an instance
 * without endpoints, and one with several endpoints (a disabled one included, oldest first, another instance's left
 * out). Taking the instance's next sequence numbers with it (`routeAndAdvance`) answers the same routing, numbers
 * without gaps, the webhook's 410 state, and takes nothing for an instance that does not exist. The store draws a
 * new random routing version at every update of an instance and a new stamp at every endpoint written (triggers,
 * migration 0023), whoever writes; the advance answers the version with the endpoints' count and stamps, and the
 * routing is read again only when those moved, so a change made through another connection (another process,
 * another node) reaches the next advance, a routing read inside a transaction that rolled back is never taken for a
 * later one, and an unchanged routing costs the advance its one statement (docs/decisions/0065-routing-version.md).
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { type KyselyPlugin, sql } from 'kysely';
import { openStore, type Store } from '../../src/store/database.ts';
import { routeAndAdvance } from '../../src/store/instance-routing.ts';
import { createInstance, getInstance, updateInstance } from '../../src/store/instances.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import {
  deleteEndpoint,
  insertEndpoint,
  listEndpoints,
  updateEndpoint,
} from '../../src/store/webhook-endpoints.ts';
import { getWebhookState } from '../../src/store/webhook-events.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`instance routing [${dialect}]`, () => {
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

    /** The routing `routeAndAdvance` answers for `id`, taking one number. */
    const routingOf = async (id: string) => {
      const advanced = await ts.store.db.transaction().execute((trx) => routeAndAdvance(trx, id, 1));
      if (!advanced) return undefined;
      return { instance: advanced.instance, endpoints: advanced.endpoints };
    };

    it('answers undefined for an instance that does not exist', async () => {
      assert.equal(await routingOf(randomUUID()), undefined);
    });

    it('answers the instance row and no endpoints for an instance without any', async () => {
      const routing = await routingOf(bare);
      assert.deepEqual(routing, { instance: await getInstance(ts.store.db, bare), endpoints: [] });
    });

    it('answers the instance row and every endpoint of its own, disabled included, oldest first', async () => {
      const db = ts.store.db;
      const routing = await routingOf(routed);
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
      const before = (await getWebhookState(db, routed)).lastSequence;
      assert.deepEqual(await advance(routed, 3), {
        instance: await getInstance(db, routed),
        endpoints: await listEndpoints(db, routed),
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

      // The numbers of an instance's state row continue from the ones the reads above took.
      const bareBefore = (await getWebhookState(db, bare)).lastSequence;
      assert.deepEqual(await advance(bare, 4), {
        instance: await getInstance(db, bare),
        endpoints: [],
        last: bareBefore + 4,
        disabledAt: null,
        disabledReason: null,
      });
    });

    it("starts an instance's state row at the count of its first events", async () => {
      const db = ts.store.db;
      const org = await createOrganization(db, { name: 'first', plan: 'pro' });
      const fresh = (await createInstance(db, { orgId: org.id, env: 'test', name: 'fresh' })).id;
      const advanced = await db.transaction().execute((trx) => routeAndAdvance(trx, fresh, 4));
      assert.equal(advanced?.last, 4);
      assert.equal((await getWebhookState(db, fresh)).lastSequence, 4);
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

    it('draws a new version at every update of the instance, a new stamp at every endpoint written', async () => {
      const db = ts.store.db;
      const version = async () =>
        String(
          (
            await db
              .selectFrom('instances')
              .select('routing_version')
              .where('id', '=', bare)
              .executeTakeFirstOrThrow()
          ).routing_version,
        );
      const stamps = async () =>
        (
          await db
            .selectFrom('webhook_endpoints')
            .select(['id', 'routing_stamp'])
            .where('instance_id', '=', bare)
            .orderBy('id')
            .execute()
        ).map((row) => `${row.id}=${row.routing_stamp}`);
      const seen = new Set<string>([await version()]);
      const instanceChanges: [string, () => Promise<unknown>][] = [
        ['the webhook URL', () => updateInstance(db, bare, { webhookUrl: 'https://hooks.example.com/bare' })],
        ['the subscription', () => updateInstance(db, bare, { subscribe: ['Message'] })],
        [
          'the name',
          () => db.updateTable('instances').set({ name: 'renamed' }).where('id', '=', bare).execute(),
        ],
      ];
      for (const [what, change] of instanceChanges) {
        await change();
        const now = await version();
        assert.ok(!seen.has(now), `${what}: a version not seen before`);
        seen.add(now);
      }
      // Written with plain SQL, as another tool would: the triggers draw the stamps, whoever writes the row.
      const id = randomUUID();
      await db
        .insertInto('webhook_endpoints')
        .values({
          id,
          instance_id: bare,
          url: 'https://d.example.com/',
          events: '["Message"]',
          description: null,
          secret: 'sealed',
          url_sealed: null,
          enabled: 1,
          disabled_at: null,
          disabled_reason: null,
          created_at: 5_000,
          updated_at: 5_000,
        })
        .execute();
      const [inserted] = await stamps();
      assert.ok(inserted !== undefined && inserted !== `${id}=0`, 'a stamp drawn at the insert');
      await db.updateTable('webhook_endpoints').set({ enabled: 0 }).where('id', '=', id).execute();
      const [updated] = await stamps();
      assert.ok(updated !== undefined && updated !== inserted, 'a new stamp drawn at the update');
      // A change rolled back takes its number with it.
      const before = await version();
      await assert.rejects(
        db.transaction().execute(async (trx) => {
          await trx.updateTable('instances').set({ name: 'rolled back' }).where('id', '=', bare).execute();
          throw new Error('roll back');
        }),
        /roll back/,
      );
      assert.equal(await version(), before);
    });

    it('keeps its triggers (a table rebuilt by a later migration must create them again)', async () => {
      const db = ts.store.db;
      const { rows } =
        dialect === 'sqlite'
          ? await sql<{ name: string }>`select name from sqlite_master where type = 'trigger'`.execute(db)
          : await sql<{ name: string }>`
              select t.tgname as name from pg_trigger t
              join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
              where n.nspname = ${ts.schema ?? 'public'} and not t.tgisinternal`.execute(db);
      const names = rows.map((row) => row.name);
      const expected =
        dialect === 'sqlite'
          ? [
              'instances_routing_version',
              'webhook_endpoints_insert_routing_stamp',
              'webhook_endpoints_update_routing_stamp',
            ]
          : ['instances_routing_version', 'webhook_endpoints_routing_stamp'];
      assert.deepEqual(names.filter((name) => /routing_(version|stamp)$/.test(name)).sort(), expected);
    });

    describe('routings kept between advances', () => {
      let other: Store;
      let instance: string;
      let statements = 0;
      const counting: KyselyPlugin = {
        transformQuery: (args) => args.node,
        transformResult: async (args) => {
          statements += 1;
          return args.result;
        },
      };

      before(async () => {
        // A second handle on the same database: another process, or another node on PostgreSQL.
        other = await openStore(ts.database, ts.schema ? { schema: ts.schema, poolSize: 2 } : {});
        const org = await createOrganization(ts.store.db, { name: 'kept', plan: 'pro' });
        instance = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'kept' })).id;
      });
      after(() => other.destroy());

      /** Advances by one on the service's store; → the routing answered and the statements it took. */
      const advance = async () => {
        const counted = ts.store.db.withPlugin(counting);
        statements = 0;
        const routing = await counted.transaction().execute((trx) => routeAndAdvance(trx, instance, 1));
        return { routing, statements };
      };

      it('answers an unchanged routing from the one statement of the advance', async () => {
        const first = await advance();
        assert.equal(first.statements, 2, 'the first advance reads the routing');
        const second = await advance();
        assert.equal(second.statements, 1, 'the next one does not');
        assert.equal(second.routing?.last, (first.routing?.last ?? 0) + 1);
        assert.deepEqual({ ...second.routing, last: 0 }, { ...first.routing, last: 0 });
      });

      it('reads again after a change made through another connection, and answers the change', async () => {
        await advance();
        await updateInstance(other.db, instance, { webhookUrl: 'https://hooks.example.com/kept' });
        let next = await advance();
        assert.equal(next.statements, 2);
        assert.equal(next.routing?.instance.webhookUrl, 'https://hooks.example.com/kept');
        assert.deepEqual(next.routing?.instance, await getInstance(other.db, instance));

        const id = randomUUID();
        await insertEndpoint(
          other.db,
          {
            id,
            instanceId: instance,
            url: 'https://e.example.com/',
            events: ['Message'],
            description: null,
            secretSealed: 'sealed',
            urlSealed: null,
            now: 7_000,
          },
          10,
        );
        next = await advance();
        assert.deepEqual(
          next.routing?.endpoints.map((e) => [e.id, e.enabled]),
          [[id, true]],
        );
        await updateEndpoint(other.db, instance, id, { enabled: false }, 8_000);
        next = await advance();
        assert.deepEqual(
          next.routing?.endpoints.map((e) => [e.id, e.enabled]),
          [[id, false]],
        );
        await deleteEndpoint(other.db, instance, id);
        next = await advance();
        assert.deepEqual(next.routing?.endpoints, []);
        assert.equal((await advance()).statements, 1);
      });

      it('never keeps a routing read inside a transaction that rolled back', async () => {
        await advance();
        // A batch that changed the instance (a login's phone) and read the routing, then rolled back.
        await assert.rejects(
          ts.store.db.transaction().execute(async (trx) => {
            await trx
              .updateTable('instances')
              .set({ phone: '5511999990000' })
              .where('id', '=', instance)
              .execute();
            const routing = await routeAndAdvance(trx, instance, 1);
            assert.equal(routing?.instance.phone, '5511999990000');
            throw new Error('roll back');
          }),
          /roll back/,
        );
        // Another connection then changes the routing: its version is a new number, not the one rolled back.
        await updateInstance(other.db, instance, { webhookUrl: 'https://hooks.example.com/after-rollback' });
        const next = await advance();
        assert.equal(next.statements, 2);
        assert.equal(next.routing?.instance.webhookUrl, 'https://hooks.example.com/after-rollback');
        assert.equal(next.routing?.instance.phone, null);
      });

      it('hands out a frozen routing: a caller cannot change what later batches get', async () => {
        const { routing } = await advance();
        assert.ok(routing);
        assert.ok(Object.isFrozen(routing.instance));
        assert.ok(Object.isFrozen(routing.endpoints));
        assert.throws(() => {
          (routing.endpoints as unknown[]).push({});
        }, TypeError);
      });

      it('answers undefined, taking no number, once another connection deleted the instance', async () => {
        await advance();
        const before = (await getWebhookState(ts.store.db, instance)).lastSequence;
        await other.db.deleteFrom('instances').where('id', '=', instance).execute();
        const { routing } = await advance();
        assert.equal(routing, undefined);
        const rows = await ts.store.db
          .selectFrom('webhook_state')
          .select('last_sequence')
          .where('instance_id', '=', instance)
          .execute();
        assert.ok(rows.every((row) => Number(row.last_sequence) === before));
      });
    });
  });
}
