/**
 * The dashboard's profile panel and blocklist (docs/decisions/0039-profile-privacy-blocklist.md,
 * docs/decisions/0022-dashboard.md): read by a viewer, changed by a member with the CSRF token, through the same
 * service and rules as `/v1/profile` and `/v1/contacts/block*`; another organization's instance is not found.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { adminCreateUser } from '../../src/app/users.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createUser, type DashboardClient, PASSWORD, signIn } from './support.ts';

const error = (code: number, message: string) => ({ error: { code, message } });
const ok = (data: unknown) => ({ success: true, code: 200, data });
const PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
const ANA = '5511988887777';

for (const dialect of testDialects()) {
  describe(`dashboard API: the account's profile and blocklist [${dialect}]`, () => {
    let t: TestApp;
    let member: DashboardClient;
    let viewer: DashboardClient;
    let base = '';
    before(async () => {
      t = await createTestApp({ dialect });
      member = await signIn(t, await createUser(t, 'member'));
      viewer = await signIn(t, await createUser(t, 'viewer'));
      base = `/instances/${t.instance.id}`;
    });
    after(() => t.close());

    it('answers 409 before login, as the API does', async () => {
      assert.deepEqual(
        (await viewer.call('GET', `${base}/profile`)).body,
        error(409, 'instance is not logged in'),
      );
      assert.deepEqual(
        (await viewer.call('GET', `${base}/blocklist`)).body,
        error(409, 'instance is not logged in'),
      );
      await loginSandbox(t, '5511999990001');
    });

    it('a member changes the name, about text and picture; a viewer reads them', async () => {
      const changed = await member.call('PUT', `${base}/profile`, {
        name: 'Acme Store',
        about: 'Open 9-18',
        picture: PNG,
      });
      assert.equal(changed.status, 200, JSON.stringify(changed.body));
      assert.equal(changed.body.data.name, 'Acme Store');
      assert.equal(changed.body.data.about, 'Open 9-18');
      assert.match(changed.body.data.pictureUrl, /^https:\/\/sandbox\.parley\.invalid\/avatars\//);
      assert.deepEqual((await viewer.call('GET', `${base}/profile`)).body, changed.body);
      assert.deepEqual((await t.call('GET', '/v1/profile')).body, changed.body);
      const refused = await member.call('PUT', `${base}/profile`, { name: 'x'.repeat(26) });
      assert.deepEqual(refused.body, error(400, 'name must be at most 25 characters'));
      const badPicture = await member.call('PUT', `${base}/profile`, {
        picture: 'data:text/plain;base64,aGVsbG8=',
      });
      assert.deepEqual(badPicture.body, error(400, 'picture must be JPEG, PNG or WEBP'));
    });

    it('a member blocks and unblocks; a viewer reads the blocklist', async () => {
      assert.deepEqual(
        (await member.call('POST', `${base}/block`, { phone: ANA })).body,
        ok({ phones: [ANA] }),
      );
      assert.deepEqual((await viewer.call('GET', `${base}/blocklist`)).body, ok({ phones: [ANA] }));
      assert.deepEqual((await t.call('GET', '/v1/contacts/blocklist')).body, ok({ phones: [ANA] }));
      assert.deepEqual(
        (await member.call('POST', `${base}/unblock`, { phone: ANA })).body,
        ok({ phones: [] }),
      );
      assert.deepEqual(
        (await member.call('POST', `${base}/block`, { phone: '5511977770000' })).body,
        error(422, 'phone 5511977770000 is not registered on the platform'),
      );
    });

    it('refuses a change without the CSRF token or by a viewer, and another organization’s user', async () => {
      const changes = [
        ['PUT', `${base}/profile`, { about: 'x' }],
        ['POST', `${base}/block`, { phone: ANA }],
        ['POST', `${base}/unblock`, { phone: ANA }],
      ] as const;
      for (const [method, path, body] of changes) {
        const noCsrf = await member.call(method, path, body, { csrf: false });
        assert.deepEqual(noCsrf.body, error(403, 'missing or invalid CSRF token'), `${method} ${path}`);
        const byViewer = await viewer.call(method, path, body);
        assert.deepEqual(
          byViewer.body,
          error(403, 'this needs the member role (you are viewer)'),
          `${method} ${path}`,
        );
      }
      assert.equal(
        (await t.app.inject({ method: 'GET', url: `/dashboard/api${base}/profile` })).statusCode,
        401,
      );
      assert.deepEqual((await viewer.call('GET', `${base}/blocklist`)).body, ok({ phones: [] }));
      const org = await adminCreateOrg(t.testStore.store.db, { name: `other-${Date.now()}` });
      const email = `stranger-${Date.now()}@example.com`;
      await adminCreateUser(t.testStore.store.db, { org: org.id, email, role: 'owner', password: PASSWORD });
      const stranger = await signIn(t, email);
      for (const [method, path, body] of [
        ['GET', `${base}/profile`, undefined],
        ['GET', `${base}/blocklist`, undefined],
        ...changes,
      ] as const) {
        const response = await stranger.call(method, path, body);
        assert.deepEqual(response.body, error(404, 'instance not found'), `${method} ${path}`);
      }
    });
  });
}
