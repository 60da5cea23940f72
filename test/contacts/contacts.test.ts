import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const OWN = '5511999990001';
const PHONE_RULE = 'must be digits only, international format, no leading +';

const bad = (status: number, message: string) => ({ error: { code: status, message } });
const okBody = (data: unknown) => ({ success: true, code: 200, data });

for (const dialect of testDialects()) {
  describe(`contacts routes (docs/api.md#contacts, docs/decisions/0020-security-promises.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    it('answers 409 on every route before login, and once disconnected', async () => {
      const calls = async () => [
        await t.call('POST', '/v1/contacts/check', { phones: ['5511999990002'] }),
        await t.call('GET', '/v1/contacts/list'),
        await t.call('GET', '/v1/contacts/info?phone=5511999990002'),
        await t.call('GET', '/v1/contacts/avatar?phone=5511999990002'),
      ];
      for (const res of await calls()) assert.deepEqual(res.body, bad(409, 'instance is not logged in'));
      assert.equal((await t.call('POST', '/v1/session/connect')).status, 200);
      for (const res of await calls()) assert.deepEqual(res.body, bad(409, 'instance is not logged in'));
      const other = await t.newInstance('test', 'other');
      await loginSandbox(t, '5511999990099', other.id);
      await t.call('POST', `/v1/session/disconnect?from=${other.id}`);
      const res = await t.call('GET', `/v1/contacts/list?from=${other.id}`);
      assert.deepEqual(res.body, bad(409, 'instance is not connected'));
      t.clock.advance(1000); // now the most recently connected one (docs/decisions/0002-instance-resolution.md)
      await loginSandbox(t, OWN);
    });

    it('check: one entry per queried number, in order, with every field of docs/api.md#contacts', async () => {
      const defined = await t.call('POST', '/v1/sandbox/users', {
        phone: '5511999990003',
        verifiedName: 'Acme Ltd',
      });
      assert.equal(defined.status, 200);
      const res = await t.call('POST', `/v1/contacts/check?from=${t.instance.id}`, {
        phones: ['5511999990002', '5511999990000', '5511999990003', '5511999990002'],
      });
      assert.equal(res.status, 200);
      assert.deepEqual(
        res.body,
        okBody({
          users: [
            {
              query: '5511999990002',
              isInPlatform: true,
              jid: '5511999990002@s.whatsapp.net',
              verifiedName: '',
            },
            { query: '5511999990000', isInPlatform: false, jid: null, verifiedName: '' },
            {
              query: '5511999990003',
              isInPlatform: true,
              jid: '5511999990003@s.whatsapp.net',
              verifiedName: 'Acme Ltd',
            },
            {
              query: '5511999990002',
              isInPlatform: true,
              jid: '5511999990002@s.whatsapp.net',
              verifiedName: '',
            },
          ],
        }),
      );
    });

    it('check: validates phones (required, array, 1..500 items, each 8–15 digits)', async () => {
      const check = (body: unknown) => t.call('POST', '/v1/contacts/check', body);
      assert.deepEqual((await check({})).body, bad(400, 'phones is required'));
      assert.deepEqual((await check(undefined)).body, bad(400, 'phones is required'));
      assert.deepEqual((await check({ phones: '5511999990002' })).body, bad(400, 'phones must be an array'));
      assert.deepEqual((await check({ phones: [] })).body, bad(400, 'phones must have at least 1 item'));
      const malformed = await check({ phones: ['5511999990002', '5511999990003', '+5511999990004'] });
      assert.deepEqual(malformed.body, bad(400, `phones[2] ${PHONE_RULE}`));
      assert.deepEqual((await check({ phones: ['1234567'] })).body, bad(400, `phones[0] ${PHONE_RULE}`));
      assert.deepEqual(
        (await check({ phones: ['1234567890123456'] })).body,
        bad(400, `phones[0] ${PHONE_RULE}`),
      );
      assert.deepEqual((await check({ phones: [5511999990002] })).body, bad(400, `phones[0] ${PHONE_RULE}`));
      const many = Array.from({ length: 501 }, (_, i) => String(5511900000000 + i));
      assert.deepEqual((await check({ phones: many })).body, bad(400, 'phones must have at most 500 items'));
      const limit = await check({ phones: many.slice(0, 500) });
      assert.equal(limit.status, 200);
      assert.equal(limit.body.data.users.length, 500);
      assert.equal(limit.body.data.users[499].query, many[499]);
    });

    it('list: an object keyed by user JID with the fields of docs/api.md#contacts', async () => {
      await t.call('POST', '/v1/sandbox/users', {
        phone: '5511999990005',
        pushName: 'Bia',
        firstName: 'Beatriz',
        fullName: 'Beatriz Lima',
        businessName: 'Lima & Co',
      });
      await t.call('POST', '/v1/sandbox/users', { phone: '5511999990006', registered: false });
      const inbound = await t.call('POST', '/v1/sandbox/inbound', {
        phone: '5511999990007',
        body: 'hello',
        pushName: 'Caio',
      });
      assert.equal(inbound.status, 200);
      const res = await t.call('GET', '/v1/contacts/list');
      assert.equal(res.status, 200);
      const data = res.body.data;
      assert.deepEqual(data['5511999990005@s.whatsapp.net'], {
        businessName: 'Lima & Co',
        firstName: 'Beatriz',
        fullName: 'Beatriz Lima',
        pushName: 'Bia',
        found: true,
      });
      assert.deepEqual(data['5511999990003@s.whatsapp.net'], {
        businessName: '',
        firstName: '',
        fullName: '',
        pushName: 'User 0003',
        found: true,
      });
      assert.deepEqual(data['5511999990007@s.whatsapp.net'], {
        businessName: '',
        firstName: '',
        fullName: '',
        pushName: 'Caio',
        found: true,
      });
      assert.equal(data['5511999990006@s.whatsapp.net'], undefined, 'unregistered users are not contacts');
      for (const [jid, entry] of Object.entries<any>(data)) {
        assert.match(jid, /^\d{8,15}@s\.whatsapp\.net$/);
        assert.deepEqual(Object.keys(entry).sort(), [
          'businessName',
          'firstName',
          'found',
          'fullName',
          'pushName',
        ]);
        for (const key of ['businessName', 'firstName', 'fullName', 'pushName']) {
          assert.equal(typeof entry[key], 'string');
        }
        assert.equal(typeof entry.found, 'boolean');
      }
    });

    it('info: profile details per number, in order; comma-separated list', async () => {
      const one = await t.call('GET', '/v1/contacts/info?phone=5511999990003');
      assert.deepEqual(
        one.body,
        okBody({
          users: [
            {
              query: '5511999990003',
              jid: '5511999990003@s.whatsapp.net',
              status: 'Hey there! I am using WhatsApp.',
              pictureId: '',
              verifiedName: 'Acme Ltd',
            },
          ],
        }),
      );
      const many = await t.call('GET', '/v1/contacts/info?phone=5511999990000,5511999990002');
      assert.equal(many.status, 200);
      const [unregistered, withPicture] = many.body.data.users;
      assert.deepEqual(unregistered, {
        query: '5511999990000',
        jid: null,
        status: '',
        pictureId: '',
        verifiedName: '',
      });
      assert.equal(withPicture.query, '5511999990002');
      assert.equal(withPicture.jid, '5511999990002@s.whatsapp.net');
      assert.match(withPicture.pictureId, /^\d+$/);
      assert.deepEqual(Object.keys(withPicture).sort(), [
        'jid',
        'pictureId',
        'query',
        'status',
        'verifiedName',
      ]);
    });

    it('info: validates phone (required, each 8–15 digits, at most 100)', async () => {
      assert.deepEqual((await t.call('GET', '/v1/contacts/info')).body, bad(400, 'phone is required'));
      assert.deepEqual(
        (await t.call('GET', '/v1/contacts/info?phone=abc')).body,
        bad(400, `phone ${PHONE_RULE}`),
      );
      assert.deepEqual(
        (await t.call('GET', '/v1/contacts/info?phone=5511999990002,55x')).body,
        bad(400, `phone[1] ${PHONE_RULE}`),
      );
      const many = Array.from({ length: 101 }, (_, i) => String(5511900000000 + i)).join(',');
      assert.deepEqual(
        (await t.call('GET', `/v1/contacts/info?phone=${many}`)).body,
        bad(400, 'phone must list at most 100 numbers'),
      );
    });

    it('avatar: { url, id } for a user with a picture, 404 without one', async () => {
      const info = await t.call('GET', '/v1/contacts/info?phone=5511999990002');
      const res = await t.call('GET', '/v1/contacts/avatar?phone=5511999990002');
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.body.data).sort(), ['id', 'url']);
      assert.equal(res.body.data.id, info.body.data.users[0].pictureId);
      assert.match(res.body.data.url, /^https:\/\//);
      const none = await t.call('GET', '/v1/contacts/avatar?phone=5511999990003');
      assert.deepEqual(none.body, bad(404, 'user 5511999990003 has no profile picture'));
      assert.deepEqual((await t.call('GET', '/v1/contacts/avatar')).body, bad(400, 'phone is required'));
      assert.deepEqual(
        (await t.call('GET', '/v1/contacts/avatar?phone=12')).body,
        bad(400, `phone ${PHONE_RULE}`),
      );
    });

    it('needs scope chat:contacts and honours x-instance-id', async () => {
      const groupsOnly = await t.newKey({ scopes: ['chat:groups'] });
      const denied = await t.call('GET', '/v1/contacts/list', undefined, {
        authorization: `Bearer ${groupsOnly}`,
      });
      assert.deepEqual(denied.body, bad(403, 'API key lacks required scope chat:contacts'));
      const byHeader = await t.call('GET', '/v1/contacts/list', undefined, {
        'x-instance-id': t.instance.id,
      });
      assert.equal(byHeader.status, 200);
      const unknown = await t.call('GET', '/v1/contacts/list', undefined, {
        'x-instance-id': '00000000-0000-4000-8000-000000000000',
      });
      assert.deepEqual(unknown.body, bad(404, 'instance not found'));
    });
  });
}
