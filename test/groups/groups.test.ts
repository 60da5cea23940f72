import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const OWN = '5511999990001';
const OWN_JID = `${OWN}@s.whatsapp.net`;
const PHONE_RULE = 'must be digits only, international format, no leading +';
const GROUP_JID_RULE = 'groupJid must be a group JID: <digits>@g.us or <digits>-<digits>@g.us';
const INVITE_BASE = 'https://invite.example.test/';

const bad = (status: number, message: string) => ({ error: { code: status, message } });
const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;

const CREATE_FIELDS = ['groupCreated', 'jid', 'name', 'ownerJid', 'participants'];
const LIST_FIELDS = [...CREATE_FIELDS, 'disappearingTimer', 'isAnnounce', 'isEphemeral', 'isLocked'].sort();
const INFO_FIELDS = [...LIST_FIELDS, 'nameSetAt', 'nameSetBy', 'topic'].sort();

function assertParticipants(participants: any[]): void {
  for (const p of participants) {
    assert.deepEqual(Object.keys(p).sort(), ['isAdmin', 'isSuperAdmin', 'jid']);
    assert.match(p.jid, /^\d{8,15}@s\.whatsapp\.net$/);
    assert.equal(typeof p.isAdmin, 'boolean');
    assert.equal(typeof p.isSuperAdmin, 'boolean');
  }
}

for (const dialect of testDialects()) {
  describe(`groups routes (docs/api.md#groups, docs/decisions/0001-envelope-and-error-codes.md, docs/decisions/0020-security-promises.md) [${dialect}]`, () => {
    let t: TestApp;
    let created: any;
    before(async () => {
      t = await createTestApp({ dialect, env: { INVITE_BASE_URL: INVITE_BASE } });
    });
    after(() => t.close());

    it('answers 409 on every route before login', async () => {
      const calls = [
        await t.call('POST', '/v1/groups/create', { name: 'Team', participants: ['5511999990002'] }),
        await t.call('GET', '/v1/groups/list'),
        await t.call('GET', '/v1/groups/info?groupJid=120363000000000001@g.us'),
        await t.call('GET', '/v1/groups/invite-link?groupJid=120363000000000001@g.us'),
      ];
      for (const res of calls) assert.deepEqual(res.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
    });

    it('create: exactly the create fields; the creator is owner, admin and super admin', async () => {
      const res = await t.call('POST', '/v1/groups/create', {
        name: 'Team',
        participants: ['5511999990002', '5511999990003', '5511999990002'],
      });
      assert.equal(res.status, 200);
      assert.equal(res.body.success, true);
      created = res.body.data;
      assert.deepEqual(Object.keys(created).sort(), CREATE_FIELDS);
      assert.match(created.jid, /^\d+(-\d+)?@g\.us$/);
      assert.equal(created.name, 'Team');
      assert.equal(created.ownerJid, OWN_JID);
      assert.equal(created.groupCreated, new Date(t.clock()).toISOString());
      assert.deepEqual(created.participants, [
        { jid: OWN_JID, isAdmin: true, isSuperAdmin: true },
        { jid: jidOf('5511999990002'), isAdmin: false, isSuperAdmin: false },
        { jid: jidOf('5511999990003'), isAdmin: false, isSuperAdmin: false },
      ]);
    });

    it('create: validates name (required, non-empty, at most 25 characters) and participants', async () => {
      const create = (body: unknown) => t.call('POST', '/v1/groups/create', body);
      const p = ['5511999990002'];
      assert.deepEqual((await create({ participants: p })).body, bad(400, 'name is required'));
      assert.deepEqual((await create({ name: 7, participants: p })).body, bad(400, 'name must be a string'));
      assert.deepEqual(
        (await create({ name: '', participants: p })).body,
        bad(400, 'name must not be empty'),
      );
      assert.deepEqual(
        (await create({ name: '   ', participants: p })).body,
        bad(400, 'name must not be blank'),
      );
      assert.deepEqual(
        (await create({ name: 'x'.repeat(26), participants: p })).body,
        bad(400, 'name must be at most 25 characters'),
      );
      const longest = await create({ name: 'x'.repeat(25), participants: p });
      assert.equal(longest.status, 200);
      assert.equal(longest.body.data.name, 'x'.repeat(25));
      const emoji = await create({ name: `${'🎉'.repeat(24)}ab`, participants: p });
      assert.deepEqual(emoji.body, bad(400, 'name must be at most 25 characters'));
      assert.deepEqual((await create({ name: 'Team' })).body, bad(400, 'participants is required'));
      assert.deepEqual(
        (await create({ name: 'Team', participants: '5511999990002' })).body,
        bad(400, 'participants must be an array'),
      );
      assert.deepEqual(
        (await create({ name: 'Team', participants: [] })).body,
        bad(400, 'participants must have at least 1 item'),
      );
      assert.deepEqual(
        (await create({ name: 'Team', participants: ['5511999990002', '55-11'] })).body,
        bad(400, `participants[1] ${PHONE_RULE}`),
      );
      const many = Array.from({ length: 257 }, (_, i) => String(5511900000001 + i));
      assert.deepEqual(
        (await create({ name: 'Big', participants: many })).body,
        bad(400, 'participants must have at most 256 items'),
      );
      const big = await create({ name: 'Big', participants: many.slice(0, 256) });
      assert.equal(big.status, 200);
      assert.equal(big.body.data.participants.length, 257, 'the creator plus 256 members');
    });

    it('list: every group the account belongs to, with exactly the list fields', async () => {
      const foreign = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Neighbours',
        ownerPhone: '5511999990004',
        participants: ['5511999990005'],
      });
      assert.equal(foreign.status, 200);
      const res = await t.call('GET', '/v1/groups/list');
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.body.data), ['groups']);
      const groups: any[] = res.body.data.groups;
      assert.ok(groups.length >= 4);
      for (const g of groups) {
        assert.deepEqual(Object.keys(g).sort(), LIST_FIELDS);
        assert.equal(typeof g.isAnnounce, 'boolean');
        assert.equal(typeof g.isLocked, 'boolean');
        assert.equal(typeof g.isEphemeral, 'boolean');
        assert.ok(Number.isInteger(g.disappearingTimer));
        assert.equal(new Date(g.groupCreated).toISOString(), g.groupCreated);
        assertParticipants(g.participants);
      }
      const team = groups.find((g) => g.jid === created.jid);
      assert.deepEqual(team, {
        ...created,
        isAnnounce: false,
        isLocked: false,
        isEphemeral: false,
        disappearingTimer: 0,
      });
      const neighbours = groups.find((g) => g.jid === foreign.body.data.jid);
      assert.equal(neighbours.ownerJid, jidOf('5511999990004'));
      assert.deepEqual(
        neighbours.participants.find((p: any) => p.jid === OWN_JID),
        { jid: OWN_JID, isAdmin: false, isSuperAdmin: false },
      );
    });

    it('info: every Group field with its type', async () => {
      const res = await t.call('GET', `/v1/groups/info?groupJid=${created.jid}`);
      assert.equal(res.status, 200);
      const info = res.body.data;
      assert.deepEqual(Object.keys(info).sort(), INFO_FIELDS);
      assert.deepEqual(info, {
        ...created,
        topic: '',
        nameSetAt: created.groupCreated,
        nameSetBy: OWN_JID,
        isAnnounce: false,
        isLocked: false,
        isEphemeral: false,
        disappearingTimer: 0,
      });
    });

    it('info and invite-link: validate groupJid; 404 for a group the account is not in', async () => {
      for (const route of ['info', 'invite-link']) {
        assert.deepEqual((await t.call('GET', `/v1/groups/${route}`)).body, bad(400, 'groupJid is required'));
        for (const malformed of ['abc', '123@s.whatsapp.net', '12-@g.us', '@g.us', '123@g.us.evil']) {
          const res = await t.call('GET', `/v1/groups/${route}?groupJid=${encodeURIComponent(malformed)}`);
          assert.deepEqual(res.body, bad(400, GROUP_JID_RULE), `${route} ${malformed}`);
        }
        for (const unknown of ['120363999999999999@g.us', '5511999990004-1700000000@g.us']) {
          const res = await t.call('GET', `/v1/groups/${route}?groupJid=${unknown}`);
          assert.deepEqual(res.body, bad(404, `group ${unknown} not found`), `${route} ${unknown}`);
        }
      }
    });

    it('invite-link: the configured base URL plus the code; 403 for a non-admin', async () => {
      const res = await t.call('GET', `/v1/groups/invite-link?groupJid=${created.jid}`);
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.body.data), ['inviteLink']);
      assert.ok(res.body.data.inviteLink.startsWith(INVITE_BASE), res.body.data.inviteLink);
      assert.match(res.body.data.inviteLink.slice(INVITE_BASE.length), /^[A-Za-z0-9]+$/);
      const again = await t.call('GET', `/v1/groups/invite-link?groupJid=${created.jid}`);
      assert.equal(again.body.data.inviteLink, res.body.data.inviteLink);

      const foreign = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Not mine',
        ownerPhone: '5511999990008',
        participants: [],
      });
      assert.equal(foreign.status, 200);
      const denied = await t.call('GET', `/v1/groups/invite-link?groupJid=${foreign.body.data.jid}`);
      assert.deepEqual(denied.body, bad(403, 'you must be a group admin to get the invite link'));
    });

    it('needs scope chat:groups', async () => {
      const contactsOnly = await t.newKey({ scopes: ['chat:contacts'] });
      const res = await t.call('GET', '/v1/groups/list', undefined, {
        authorization: `Bearer ${contactsOnly}`,
      });
      assert.deepEqual(res.body, bad(403, 'API key lacks required scope chat:groups'));
    });
  });
}
