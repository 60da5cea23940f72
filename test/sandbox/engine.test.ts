import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EngineSession } from '../../src/engines/engine.ts';
import { appFor, OWN, PEER, UNREGISTERED } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;

/** Every platform operation of the engine contract, called with harmless arguments. */
function operations(session: EngineSession): [string, () => Promise<unknown>][] {
  return [
    [
      'send',
      () => session.send({ to: jidOf(PEER), content: { kind: 'text', text: 'x', linkPreview: false } }),
    ],
    ['react', () => session.react(jidOf(PEER), 'X', false, '👍')],
    ['markRead', () => session.markRead(jidOf(PEER), ['X'])],
    ['checkPhones', () => session.checkPhones([PEER])],
    ['userInfo', () => session.userInfo([PEER])],
    ['avatar', () => session.avatar(PEER)],
    ['contacts', () => session.contacts()],
    ['createGroup', () => session.createGroup('G', [jidOf(PEER)])],
    ['listGroups', () => session.listGroups()],
    ['groupInfo', () => session.groupInfo('120363000000000001@g.us')],
    ['groupInviteCode', () => session.groupInviteCode('120363000000000001@g.us')],
  ];
}

for (const dialect of testDialects()) {
  describe(`sandbox engine operations (docs/decisions/0004-sandbox.md; docs/api.md#contacts, docs/api.md#groups) [${dialect}]`, () => {
    let t: TestApp;
    let session: EngineSession;
    before(async () => {
      t = await appFor(dialect);
      const instance = await t.services.sessions.reload(t.instance.id);
      session = await t.services.sessions.session(instance);
    });
    after(() => t.close());

    it('every operation needs the account logged in and connected (409)', async () => {
      for (const [name, call] of operations(session)) {
        await assert.rejects(call(), { code: 'not_logged_in', message: 'instance is not logged in' }, name);
      }
      await loginSandbox(t, OWN);
      await t.call('POST', '/v1/session/disconnect');
      for (const [name, call] of operations(session)) {
        await assert.rejects(call(), { code: 'not_connected', message: 'instance is not connected' }, name);
      }
      await t.call('POST', '/v1/session/connect');
    });

    it('checkPhones and userInfo: one entry per number in order; numbers ending in 0000 are not registered', async () => {
      assert.deepEqual(await session.checkPhones([PEER, UNREGISTERED, PEER]), [
        { query: PEER, isInPlatform: true, jid: jidOf(PEER), verifiedName: '' },
        { query: UNREGISTERED, isInPlatform: false, jid: null, verifiedName: '' },
        { query: PEER, isInPlatform: true, jid: jidOf(PEER), verifiedName: '' },
      ]);
      const [peer, unregistered] = await session.userInfo([PEER, UNREGISTERED]);
      assert.deepEqual(unregistered, {
        query: UNREGISTERED,
        jid: null,
        status: '',
        pictureId: '',
        verifiedName: '',
      });
      assert.equal(peer?.jid, jidOf(PEER));
      assert.equal(peer?.status, 'Hey there! I am using WhatsApp.');
      assert.match(peer?.pictureId ?? '', /^\d{10}$/, 'last digit 2 is even: a picture');
    });

    it('avatar: users whose number ends in an even digit have a picture, others none; stable ids', async () => {
      const even = await session.avatar('5511999990004');
      assert.ok(even);
      assert.match(even.id, /^\d{10}$/);
      assert.equal(even.url, `https://sandbox.parley.invalid/avatars/5511999990004.jpg?id=${even.id}`);
      assert.deepEqual(await session.avatar('5511999990004'), even);
      assert.equal(await session.avatar('5511999990005'), null);
      assert.equal(await session.avatar(UNREGISTERED), null, 'unregistered numbers have none');
      const [info] = await session.userInfo(['5511999990005']);
      assert.equal(info?.pictureId, '');
    });

    it('createGroup: the account is owner, admin and super admin; unregistered numbers are left out', async () => {
      t.clock.set(Date.parse('2025-05-05T05:05:05.000Z'));
      const group = await session.createGroup('Team', [
        jidOf(PEER),
        jidOf(UNREGISTERED),
        jidOf(PEER),
        jidOf(OWN),
      ]);
      assert.match(group.jid, /^120363\d{12}@g\.us$/);
      assert.deepEqual(group, {
        jid: group.jid,
        name: 'Team',
        topic: '',
        ownerJid: jidOf(OWN),
        created: Date.parse('2025-05-05T05:05:05.000Z'),
        nameSetAt: Date.parse('2025-05-05T05:05:05.000Z'),
        nameSetBy: jidOf(OWN),
        isAnnounce: false,
        isLocked: false,
        isEphemeral: false,
        disappearingTimer: 0,
        participants: [
          { jid: jidOf(OWN), isAdmin: true, isSuperAdmin: true },
          { jid: jidOf(PEER), isAdmin: false, isSuperAdmin: false },
        ],
      });
      assert.deepEqual(await session.groupInfo(group.jid), group);
      const code = await session.groupInviteCode(group.jid);
      assert.match(code, /^[A-Za-z0-9]{22}$/);
      assert.equal(await session.groupInviteCode(group.jid), code, 'stable');
      await assert.rejects(session.createGroup('x'.repeat(26), []), {
        code: 'invalid',
        message: 'name must be at most 25 characters',
      });
      await assert.rejects(session.createGroup('G', ['not-a-jid']), {
        code: 'invalid',
        message: 'participants[0] must be a user JID',
      });
    });

    it('listGroups lists only groups the account is in; groupInfo of another group is 404', async () => {
      const foreign = await session.sandbox?.createForeignGroup({
        name: 'Theirs',
        ownerPhone: PEER,
        participants: [],
      });
      assert.ok(foreign);
      const listed = await session.listGroups();
      assert.ok(listed.some((g) => g.jid === foreign.jid));
      assert.ok(listed.every((g) => g.participants.some((p) => p.jid === jidOf(OWN))));
      await assert.rejects(session.groupInfo('120363000000000001@g.us'), {
        code: 'not_found',
        message: 'group not found',
      });
      await assert.rejects(session.groupInviteCode('120363000000000001@g.us'), { code: 'not_found' });
      await assert.rejects(session.groupInviteCode(foreign.jid), {
        code: 'forbidden',
        message: 'you must be a group admin to get the invite link',
      });
    });

    it('send returns after the message event is recorded; unregistered recipients are refused', async () => {
      const sent = await session.send({
        to: jidOf(PEER),
        content: { kind: 'text', text: 'direct', linkPreview: false },
      });
      assert.match(sent.id, /^3EB0[0-9A-F]{18}$/);
      assert.equal(sent.timestamp, t.clock());
      const row = await t.services.store.db
        .selectFrom('messages')
        .select(['id', 'state'])
        .where('id', '=', sent.id)
        .executeTakeFirst();
      assert.deepEqual(row, { id: sent.id, state: 'sent' });
      await assert.rejects(
        session.send({ to: jidOf(UNREGISTERED), content: { kind: 'text', text: 'x', linkPreview: false } }),
        { code: 'not_registered', message: `recipient ${UNREGISTERED} is not registered on the platform` },
      );
      await assert.rejects(session.markRead('120363000000000001@g.us', ['X'], jidOf(PEER)), {
        code: 'not_found',
      });
    });
  });
}
