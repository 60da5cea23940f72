import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { countOwners } from '../../src/store/dashboard-users.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createUser, type DashboardClient, signIn } from './support.ts';

/**
 * Dashboard users changed by two requests at once (docs/dashboard.md): an e-mail is added once (the other request
 * answers 409, not 500), and an organization always keeps an owner, even when its two owners remove or demote each
 * other at the same instant.
 */
for (const dialect of testDialects()) {
  describe(`dashboard users under concurrent changes [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    it('two requests adding the same e-mail at once: one 200, one 409', async () => {
      const owner = await signIn(t, await createUser(t, 'owner'));
      const answers = await Promise.all([
        owner.call('POST', '/users', { email: 'twice@example.com', role: 'member' }),
        owner.call('POST', '/users', { email: 'twice@example.com', role: 'member' }),
      ]);
      assert.deepEqual(
        answers.map((answer) => answer.status).sort(),
        [200, 409],
        JSON.stringify(answers.map((answer) => answer.body)),
      );
    });

    for (const how of ['demoting', 'removing'] as const)
      it(`two owners ${how} each other at once: the organization keeps an owner`, async () => {
        const emails = [await createUser(t, 'owner'), await createUser(t, 'owner')];
        const [first, second] = [await signIn(t, emails[0] ?? ''), await signIn(t, emails[1] ?? '')];
        const users = (await first.call('GET', '/users')).body.data.users as {
          id: string;
          email: string;
          role: string;
        }[];
        // Leave only these two owners.
        for (const user of users)
          if (user.role === 'owner' && !emails.includes(user.email))
            assert.equal((await first.call('DELETE', `/users/${user.id}`)).status, 200);
        assert.equal(await countOwners(t.testStore.store.db, t.org.id), 2);
        const [a, b] = emails.map((email) => users.find((user) => user.email === email)?.id ?? '');
        const change = (client: DashboardClient, id: string) =>
          how === 'demoting'
            ? client.call('PUT', `/users/${id}/role`, { role: 'viewer' })
            : client.call('DELETE', `/users/${id}`);
        const answers = await Promise.all([change(first, b ?? ''), change(second, a ?? '')]);
        // One change wins; the other is refused: 409 for the last owner, or 401/403 when the winner's change
        // reached its session or role first.
        const statuses = answers.map((answer) => answer.status).sort();
        assert.equal(statuses[0], 200, JSON.stringify(answers.map((answer) => answer.body)));
        assert.ok(
          [401, 403, 409].includes(statuses[1] ?? 0),
          JSON.stringify(answers.map((answer) => answer.body)),
        );
        assert.equal(await countOwners(t.testStore.store.db, t.org.id), 1);
      });
  });
}
