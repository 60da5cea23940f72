/**
 * Account changes made at once on the sandbox (docs/decisions/0039-profile-privacy-blocklist.md: every write answers
 * the state after it): each reads the account's stored record, changes it and saves it whole, so they run one at a
 * time per session (src/engines/sandbox/account.ts `changeSerially`) and none is lost. Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`account changes at once on the sandbox [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('blocking several numbers at once blocks every one of them', async () => {
      const phones = ['5511977770001', '5511977770002', '5511977770003', '5511977770004'];
      const answers = await Promise.all(
        phones.map((phone) => t.call('POST', '/v1/contacts/block', { phone })),
      );
      for (const res of answers) assert.equal(res.status, 200, JSON.stringify(res.body));
      const list = await t.call('GET', '/v1/contacts/blocklist');
      assert.deepEqual(list.body.data.phones, phones);
    });

    it('privacy changes of different settings at once all stay', async () => {
      const answers = await Promise.all([
        t.call('PUT', '/v1/profile/privacy', { readReceipts: 'none' }),
        t.call('PUT', '/v1/profile/privacy', { lastSeen: 'none' }),
        t.call('PUT', '/v1/profile/privacy', { online: 'match_last_seen' }),
      ]);
      for (const res of answers) assert.equal(res.status, 200, JSON.stringify(res.body));
      const got = await t.call('GET', '/v1/profile/privacy');
      assert.deepEqual(
        [got.body.data.readReceipts, got.body.data.lastSeen, got.body.data.online],
        ['none', 'none', 'match_last_seen'],
        JSON.stringify(got.body),
      );
    });
  });
}
