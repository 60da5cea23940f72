import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Migrator } from 'kysely';
import { createInstance } from '../../src/store/instances.ts';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * Migration 0017 (docs/decisions/0035-webhook-endpoints.md): existing deliveries and attempts become the default
 * endpoint's (`endpoint_id` `''`), the deliveries' key becomes `(event_id, endpoint_id)`, and down gives the 0016
 * shape back with the default endpoint's rows kept, on both dialects.
 */
for (const dialect of testDialects()) {
  describe(`migration 0017: webhook endpoints [${dialect}]`, () => {
    let t: TestStore;
    const migrator = () =>
      new Migrator({
        db: t.store.db,
        provider: migrationProvider,
        ...(t.store.schema === undefined ? {} : { migrationTableSchema: t.store.schema }),
      });
    before(async () => {
      t = await createTestStore(dialect);
    });
    after(() => t.cleanup());

    it('keeps existing deliveries as the default endpoint’s, keys deliveries per endpoint, and goes down again', async () => {
      const db = t.store.db;
      const down = await migrator().migrateTo('0016_instance_cap');
      if (down.error) throw down.error;
      const org = await createOrganization(db, { name: 'o', plan: 'free' });
      const instance = await createInstance(db, { orgId: org.id, env: 'test', name: 'i' });
      await db
        .insertInto('webhook_events')
        .values({
          id: 'e1',
          instance_id: instance.id,
          sequence: 1,
          type: 'Message',
          payload: '{}',
          skip_reason: null,
          created_at: 1,
        })
        .execute();
      const delivery = {
        event_id: 'e1',
        instance_id: instance.id,
        sequence: 1,
        status: 'pending',
        attempts: 0,
        max_attempts: 3,
        run_at: 1,
        locked_by: null,
        locked_at: null,
        last_error: null,
        last_status: null,
        delivered_at: null,
        created_at: 1,
        updated_at: 1,
      };
      await db.insertInto('webhook_deliveries').values(delivery).execute();
      const up = await migrator().migrateToLatest();
      if (up.error) throw up.error;
      const rows = await db
        .selectFrom('webhook_deliveries')
        .select(['event_id', 'endpoint_id', 'status'])
        .execute();
      assert.deepEqual(rows, [{ event_id: 'e1', endpoint_id: '', status: 'pending' }]);
      await db
        .insertInto('webhook_deliveries')
        .values({ ...delivery, endpoint_id: 'ep1' })
        .execute();
      await assert.rejects(
        db
          .insertInto('webhook_deliveries')
          .values({ ...delivery, endpoint_id: 'ep1' })
          .execute(),
      );
      const back = await migrator().migrateTo('0016_instance_cap');
      if (back.error) throw back.error;
      const kept = await db.selectFrom('webhook_deliveries').select(['event_id', 'status']).execute();
      assert.deepEqual(kept, [{ event_id: 'e1', status: 'pending' }]);
      await assert.rejects(
        db.insertInto('webhook_deliveries').values(delivery).execute(),
        'event_id is the key again',
      );
      const again = await migrator().migrateToLatest();
      if (again.error) throw again.error;
    });
  });
}
