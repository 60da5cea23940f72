/**
 * The account's profile, privacy settings and blocklist on the sandbox (docs/api.md#profile, docs/api.md#contacts,
 * docs/decisions/0039-profile-privacy-blocklist.md): status codes, exact bodies, 400s naming the field and the rule,
 * scopes, state that persists for the session, and a blocked user's messages no longer arriving.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { declaredPng } from '../support/png.ts';
import { testDialects } from '../support/store.ts';

const OWN = '5511999990001';
const ANA = '5511988887777';
const BIA = '5511977776666';
/** A 1×1 PNG. */
const PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

const bad = (status: number, message: string) => ({ error: { code: status, message } });
const okBody = (data: unknown) => ({ success: true, code: 200, data });
const DEFAULTS = {
  lastSeen: 'all',
  online: 'all',
  profilePicture: 'all',
  about: 'contacts',
  groupAdd: 'all',
  readReceipts: 'all',
};

for (const dialect of testDialects()) {
  describe(`profile, privacy and blocklist routes (docs/api.md#profile) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    it('answers 409 on every route before login', async () => {
      const calls = [
        await t.call('GET', '/v1/profile'),
        await t.call('PUT', '/v1/profile', { name: 'X' }),
        await t.call('GET', '/v1/profile/privacy'),
        await t.call('PUT', '/v1/profile/privacy', { online: 'all' }),
        await t.call('GET', '/v1/contacts/blocklist'),
        await t.call('POST', '/v1/contacts/block', { phone: ANA }),
        await t.call('POST', '/v1/contacts/unblock', { phone: ANA }),
      ];
      for (const res of calls) assert.deepEqual(res.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
    });

    it('profile: the defaults, then name, about and picture changed and read back', async () => {
      const first = await t.call('GET', '/v1/profile');
      assert.deepEqual(
        first.body,
        okBody({ name: 'Sandbox 0001', about: 'Hey there! I am using WhatsApp.', pictureUrl: null }),
      );
      const named = await t.call('PUT', '/v1/profile', { name: 'Acme Store', about: 'Open 9–18' });
      assert.deepEqual(named.body, okBody({ name: 'Acme Store', about: 'Open 9–18', pictureUrl: null }));
      const pictured = await t.call('PUT', '/v1/profile', { picture: PNG });
      assert.equal(pictured.status, 200);
      assert.equal(pictured.body.data.name, 'Acme Store');
      assert.equal(pictured.body.data.about, 'Open 9–18');
      assert.match(
        pictured.body.data.pictureUrl,
        /^https:\/\/sandbox\.parley\.invalid\/avatars\/5511999990001\.jpg\?id=[0-9]+$/,
      );
      assert.deepEqual((await t.call('GET', '/v1/profile')).body, pictured.body);
      const cleared = await t.call('PUT', '/v1/profile', { about: '' });
      assert.equal(cleared.body.data.about, '');
      // The platform keeps the profile across logins: a new login of the number starts with the name it set.
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      await loginSandbox(t, OWN);
      const again = await t.call('GET', '/v1/profile');
      assert.deepEqual(again.body, okBody({ ...pictured.body.data, about: '' }));
    });

    it('profile: 400s name the field and the rule; 413 over the picture limits (bytes, pixels)', async () => {
      const put = (body: unknown) => t.call('PUT', '/v1/profile', body);
      assert.deepEqual(
        (await put({})).body,
        bad(400, 'request body must set at least one of name, about, picture'),
      );
      assert.deepEqual((await put({ name: '' })).body, bad(400, 'name must not be empty'));
      assert.deepEqual((await put({ name: '   ' })).body, bad(400, 'name must not be blank'));
      assert.deepEqual(
        (await put({ name: 'x'.repeat(26) })).body,
        bad(400, 'name must be at most 25 characters'),
      );
      assert.deepEqual(
        (await put({ about: 'x'.repeat(140) })).body,
        bad(400, 'about must be at most 139 characters'),
      );
      assert.deepEqual((await put({ name: 5 })).body, bad(400, 'name must be a string'));
      // Unknown fields are dropped (as on every route), so a body of only unknown fields changes nothing.
      assert.deepEqual(
        (await put({ nickname: 'x' })).body,
        bad(400, 'request body must set at least one of name, about, picture'),
      );
      assert.deepEqual(
        (await put({ picture: 'http://example.com/a.png' })).body,
        bad(400, 'picture must be an https:// URL or a data: URI'),
      );
      assert.deepEqual(
        (await put({ picture: 'data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK' })).body,
        bad(400, 'picture must be JPEG, PNG or WEBP'),
      );
      const big = `data:image/png;base64,${Buffer.alloc(5 * 1024 * 1024 + 1).toString('base64')}`;
      assert.deepEqual((await put({ picture: big })).body, bad(413, 'picture must be at most 5 MB'));
      // 74 bytes declaring 30,000 × 30,000: the live engine's platform library would decode it to scale it.
      const bomb = `data:image/png;base64,${declaredPng(30_000, 30_000).toString('base64')}`;
      assert.deepEqual(
        (await put({ picture: bomb })).body,
        bad(413, 'picture must be at most 32,000,000 pixels, width × height (it has 900,000,000)'),
      );
    });

    it('privacy: the defaults, any subset changed, every setting answered', async () => {
      assert.deepEqual((await t.call('GET', '/v1/profile/privacy')).body, okBody(DEFAULTS));
      const changed = await t.call('PUT', '/v1/profile/privacy', {
        lastSeen: 'contact_blacklist',
        online: 'match_last_seen',
        readReceipts: 'none',
      });
      const expected = {
        ...DEFAULTS,
        lastSeen: 'contact_blacklist',
        online: 'match_last_seen',
        readReceipts: 'none',
      };
      assert.deepEqual(changed.body, okBody(expected));
      const more = await t.call('PUT', '/v1/profile/privacy', {
        profilePicture: 'none',
        about: 'all',
        groupAdd: 'contacts',
      });
      const all = { ...expected, profilePicture: 'none', about: 'all', groupAdd: 'contacts' };
      assert.deepEqual(more.body, okBody(all));
      assert.deepEqual((await t.call('GET', '/v1/profile/privacy')).body, okBody(all));
    });

    it('privacy: invalid values answer 400 naming the field and the allowed values', async () => {
      const put = (body: unknown) => t.call('PUT', '/v1/profile/privacy', body);
      assert.deepEqual(
        (await put({ lastSeen: 'everyone' })).body,
        bad(400, 'lastSeen must be one of all, contacts, contact_blacklist, none'),
      );
      assert.deepEqual(
        (await put({ online: 'none' })).body,
        bad(400, 'online must be one of all, match_last_seen'),
      );
      assert.deepEqual(
        (await put({ groupAdd: 'none' })).body,
        bad(400, 'groupAdd must be one of all, contacts, contact_blacklist'),
      );
      assert.deepEqual(
        (await put({ readReceipts: 'contacts' })).body,
        bad(400, 'readReceipts must be one of all, none'),
      );
      assert.deepEqual(
        (await put({})).body,
        bad(
          400,
          'request body must set at least one of lastSeen, online, profilePicture, about, groupAdd, readReceipts',
        ),
      );
      assert.deepEqual(
        (await put({ lastseen: 'all' })).body,
        bad(
          400,
          'request body must set at least one of lastSeen, online, profilePicture, about, groupAdd, readReceipts',
        ),
      );
    });

    it('blocklist: block and unblock (idempotent), validation, and refusals', async () => {
      assert.deepEqual((await t.call('GET', '/v1/contacts/blocklist')).body, okBody({ phones: [] }));
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/block', { phone: BIA })).body,
        okBody({ phones: [BIA] }),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/block', { phone: ANA })).body,
        okBody({ phones: [BIA, ANA] }),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/block', { phone: ANA })).body,
        okBody({ phones: [BIA, ANA] }),
      );
      assert.deepEqual((await t.call('GET', '/v1/contacts/blocklist')).body, okBody({ phones: [BIA, ANA] }));
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/unblock', { phone: BIA })).body,
        okBody({ phones: [ANA] }),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/unblock', { phone: BIA })).body,
        okBody({ phones: [ANA] }),
      );
      assert.deepEqual((await t.call('POST', '/v1/contacts/block', {})).body, bad(400, 'phone is required'));
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/block', { phone: '+55119' })).body,
        bad(400, 'phone must be digits only, international format, no leading +'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/block', { phone: '5511977770000' })).body,
        bad(422, 'phone 5511977770000 is not registered on the platform'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/block', { phone: OWN })).body,
        bad(400, 'phone must be another user than this instance'),
      );
    });

    it("sandbox: a blocked user's 1:1 messages and typing no longer arrive; after unblocking they do", async () => {
      assert.equal((await t.call('POST', '/v1/contacts/block', { phone: ANA })).status, 200);
      const dropped = await t.call('POST', '/v1/sandbox/inbound', { phone: ANA, body: 'are you there?' });
      assert.equal(dropped.status, 200);
      assert.equal(
        (await t.call('POST', '/v1/sandbox/presence', { phone: ANA, state: 'composing' })).status,
        200,
      );
      const history = await t.call('GET', `/v1/chats/${ANA}/messages`);
      const texts = JSON.stringify(history.body);
      assert.doesNotMatch(texts, /are you there\?/);
      assert.equal((await t.call('POST', '/v1/contacts/unblock', { phone: ANA })).status, 200);
      const arrived = await t.call('POST', '/v1/sandbox/inbound', { phone: ANA, body: 'hello again' });
      assert.equal(arrived.status, 200);
      const after = await t.call('GET', `/v1/chats/${ANA}/messages`);
      assert.match(JSON.stringify(after.body), /hello again/);
      assert.doesNotMatch(JSON.stringify(after.body), /are you there\?/);
    });

    it('needs scope chat:session for the profile and chat:contacts for the blocklist', async () => {
      const contactsOnly = await t.newKey({ scopes: ['chat:contacts'] });
      const sessionOnly = await t.newKey({ scopes: ['chat:session'] });
      const as = (key: string) => ({ authorization: `Bearer ${key}` });
      for (const [method, path, body] of [
        ['GET', '/v1/profile', undefined],
        ['PUT', '/v1/profile', { name: 'X' }],
        ['GET', '/v1/profile/privacy', undefined],
        ['PUT', '/v1/profile/privacy', { online: 'all' }],
      ] as const) {
        const res = await t.call(method, path, body, as(contactsOnly));
        assert.deepEqual(
          res.body,
          bad(403, 'API key lacks required scope chat:session'),
          `${method} ${path}`,
        );
      }
      for (const [method, path, body] of [
        ['GET', '/v1/contacts/blocklist', undefined],
        ['POST', '/v1/contacts/block', { phone: ANA }],
        ['POST', '/v1/contacts/unblock', { phone: ANA }],
      ] as const) {
        const res = await t.call(method, path, body, as(sessionOnly));
        assert.deepEqual(
          res.body,
          bad(403, 'API key lacks required scope chat:contacts'),
          `${method} ${path}`,
        );
      }
      assert.equal((await t.call('GET', '/v1/profile', undefined, as(sessionOnly))).status, 200);
      assert.equal((await t.call('GET', '/v1/contacts/blocklist', undefined, as(contactsOnly))).status, 200);
    });
  });
}
