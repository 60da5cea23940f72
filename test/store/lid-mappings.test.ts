/**
 * The `lid_mappings` store (migration 0019, docs/decisions/0038-lid-mappings.md) and its projection: upserts replace a
 * LID's phone and time, lookups by LID and by phone (the most recently seen LID of a number), large batches, other
 * instances apart, rows gone with their instance. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { LidMappingProjection } from '../../src/events/lid-mapping-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { createInstance, deleteInstance } from '../../src/store/instances.ts';
import {
  findLidMappingByLid,
  findLidMappingByPhone,
  upsertLidMappings,
} from '../../src/store/lid-mappings.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`lid_mappings store and projection (docs/decisions/0038-lid-mappings.md) [${dialect}]`, () => {
    let ts: TestStore;
    let one: string;
    let two: string;
    const rows = (instanceId: string) =>
      ts.store.db
        .selectFrom('lid_mappings')
        .selectAll()
        .where('instance_id', '=', instanceId)
        .orderBy('lid')
        .execute();

    before(async () => {
      ts = await createTestStore(dialect);
      const org = await createOrganization(ts.store.db, { name: 'lids', plan: 'pro' });
      one = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'one' })).id;
      two = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'two' })).id;
    });
    after(() => ts.cleanup());

    it('upserts: a new LID is inserted, a known one gets the new phone and time; repeats keep the last', async () => {
      const db = ts.store.db;
      await upsertLidMappings(db, one, [{ lid: '111', phone: '5511911110000' }], 1_000);
      await upsertLidMappings(
        db,
        one,
        [
          { lid: '222', phone: '5511922220000' },
          { lid: '111', phone: '5511900000000' },
          { lid: '111', phone: '5511911111111' },
        ],
        2_000,
      );
      await upsertLidMappings(db, one, [], 3_000);
      assert.deepEqual(await rows(one), [
        { instance_id: one, lid: '111', phone: '5511911111111', updated_at: 2_000 },
        { instance_id: one, lid: '222', phone: '5511922220000', updated_at: 2_000 },
      ]);
      assert.deepEqual(await rows(two), []);
    });

    it('finds by LID and by phone (the most recently seen LID of a number); undefined when unknown', async () => {
      const db = ts.store.db;
      await upsertLidMappings(db, one, [{ lid: '333', phone: '5511922220000' }], 5_000);
      assert.deepEqual(await findLidMappingByLid(db, one, '111'), {
        lid: '111',
        phone: '5511911111111',
        updatedAt: 2_000,
      });
      assert.deepEqual(await findLidMappingByPhone(db, one, '5511922220000'), {
        lid: '333',
        phone: '5511922220000',
        updatedAt: 5_000,
      });
      assert.equal(await findLidMappingByLid(db, one, '999'), undefined);
      assert.equal(await findLidMappingByLid(db, two, '111'), undefined, 'another instance apart');
      assert.equal(await findLidMappingByPhone(db, two, '5511922220000'), undefined);
    });

    it('a batch larger than one statement carries (a history sync) is stored whole', async () => {
      const many = Array.from({ length: 1_234 }, (_, i) => ({
        lid: String(900_000 + i),
        phone: String(5_511_900_000_000 + i),
      }));
      await upsertLidMappings(ts.store.db, two, many, 7_000);
      const stored = await rows(two);
      assert.equal(stored.length, 1_234);
      assert.deepEqual(stored[1_233], {
        instance_id: two,
        lid: '901233',
        phone: '5511900001233',
        updated_at: 7_000,
      });
    });

    it('the projection writes the pairs of a lid-mapping event in the recorder transaction, ignores others', async () => {
      let now = 9_000;
      const recorder = new EventRecorder(
        ts.store.db,
        [new LidMappingProjection(() => now)],
        pino({ level: 'silent' }),
      );
      await recorder.record(one, { type: 'lid-mapping', mappings: [{ lid: '444', phone: '5511944440000' }] });
      now = 9_500;
      await recorder.record(one, { type: 'read', chat: '5511944440000@s.whatsapp.net', messageIds: ['X'] });
      assert.deepEqual(await findLidMappingByLid(ts.store.db, one, '444'), {
        lid: '444',
        phone: '5511944440000',
        updatedAt: 9_000,
      });
    });

    it('rows go with their instance (cascade)', async () => {
      assert.ok((await rows(one)).length > 0);
      assert.equal(await deleteInstance(ts.store.db, one), true);
      assert.deepEqual(await rows(one), []);
      assert.equal((await rows(two)).length, 1_234);
    });
  });
}
