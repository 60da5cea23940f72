import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextAccountGeneration, readAccountGeneration } from '../../src/store/account-generations.ts';
import { createInstance } from '../../src/store/instances.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { insertAcceptedSendJobs, storeSendJobOnce } from '../../src/store/send-jobs.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { textJob } from './support.ts';

/**
 * A new send job is inserted only under the account generation its send was accepted under
 * (docs/decisions/0074-logout-cancels-pending-sends.md, src/store/send-jobs.ts `insertAcceptedSendJobs`): a logout's
 * transaction moves `instances.account_generation` before it cancels the account's pending sends, so a job accepted
 * before is refused once it committed; in one group only that instance's jobs are. The write again of a job whose
 * answer was lost (`storeSendJobOnce`) refuses it the same way, unless its first try stored it. Runs on SQLite, and
 * on PostgreSQL when TEST_DATABASE_URL is set.
 */

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`send jobs inserted under their account generation [${dialect}]`, () => {
    it('a group stores the jobs of the generations still current and refuses the others', async () => {
      const test = await createTestStore(dialect);
      try {
        const db = test.store.db;
        const org = await createOrganization(db, { name: `o-${Math.random()}`, plan: 'pro' });
        const a = await createInstance(db, { orgId: org.id, env: 'test', name: 'a' });
        const b = await createInstance(db, { orgId: org.id, env: 'test', name: 'b' });
        assert.equal(await readAccountGeneration(db, a.id), 0);
        await db.transaction().execute((trx) => nextAccountGeneration(trx, a.id));
        assert.equal(await readAccountGeneration(db, a.id), 1);
        const stale = { ...textJob(a.id, '3EB0GEN000000000000001', 'async', T0), account: 0 };
        const current = { ...textJob(b.id, '3EB0GEN000000000000002', 'async', T0), account: 0 };
        const unchecked = textJob(a.id, '3EB0GEN000000000000003', 'async', T0);
        const refused = await insertAcceptedSendJobs(db, [stale, current, unchecked]);
        assert.deepEqual([...refused], [stale]);
        const rows = await db.selectFrom('send_jobs').select(['id', 'status']).orderBy('id').execute();
        assert.deepEqual(rows, [
          { id: '3EB0GEN000000000000002', status: 'pending' },
          { id: '3EB0GEN000000000000003', status: 'pending' },
        ]);
      } finally {
        await test.cleanup();
      }
    });

    it('a write again refuses a job its first try did not store, and finds one it did', async () => {
      const test = await createTestStore(dialect);
      try {
        const db = test.store.db;
        const org = await createOrganization(db, { name: `o-${Math.random()}`, plan: 'pro' });
        const a = await createInstance(db, { orgId: org.id, env: 'test', name: 'a' });
        const storedFirst = { ...textJob(a.id, '3EB0GEN000000000000011', 'async', T0), account: 0 };
        assert.deepEqual([...(await insertAcceptedSendJobs(db, [storedFirst]))], []);
        await db.transaction().execute((trx) => nextAccountGeneration(trx, a.id));
        const never = { ...textJob(a.id, '3EB0GEN000000000000012', 'async', T0), account: 0 };
        assert.equal(await storeSendJobOnce(db, never, T0), 'refused');
        assert.equal(await storeSendJobOnce(db, storedFirst, T0), 'found');
        const current = { ...textJob(a.id, '3EB0GEN000000000000013', 'async', T0), account: 1 };
        assert.equal(await storeSendJobOnce(db, current, T0), 'stored');
        const rows = await db.selectFrom('send_jobs').select('id').orderBy('id').execute();
        assert.deepEqual(
          rows.map((row) => row.id),
          ['3EB0GEN000000000000011', '3EB0GEN000000000000013'],
        );
      } finally {
        await test.cleanup();
      }
    });
  });
}
