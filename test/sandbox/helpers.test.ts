import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { appFor, bad, captureEvents, messageRow, OWN, PEER, UNREGISTERED } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const THIRD = '5511999990003';
const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`sandbox helpers: inbound, receipt, presence, users, groups (docs/decisions/0004-sandbox.md) [${dialect}]`, () => {
    let t: TestApp;
    let captured: { events: { instanceId: string; event: EngineEvent }[] };
    const lastEvent = () => captured.events.at(-1)?.event;
    before(async () => {
      t = await appFor(dialect);
      captured = captureEvents(t);
    });
    after(() => t.close());

    it('answers 409 before login (inbound, receipt, presence, groups); users may be defined at any time', async () => {
      const calls = [
        await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'hi' }),
        await t.call('POST', '/v1/sandbox/receipt', { id: '3EB0AA', state: 'read' }),
        await t.call('POST', '/v1/sandbox/presence', { phone: PEER, state: 'composing' }),
        await t.call('POST', '/v1/sandbox/groups', { name: 'G', ownerPhone: PEER, participants: [] }),
      ];
      for (const res of calls) assert.deepEqual(res.body, bad(409, 'instance is not logged in'));
      const user = await t.call('POST', '/v1/sandbox/users', { phone: THIRD, pushName: 'Carla' });
      assert.deepEqual(user.body, { success: true, code: 200, data: { details: `User ${THIRD} defined` } });
      await loginSandbox(t, OWN);
    });

    it('inbound: a Message event from the user, stored as delivered, with its id returned', async () => {
      t.clock.set(Date.parse('2025-04-01T08:00:00.000Z'));
      const res = await t.call('POST', '/v1/sandbox/inbound', {
        phone: PEER,
        body: 'Hello!',
        pushName: 'Bea',
      });
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.body.data), ['id']);
      const id = res.body.data.id;
      assert.match(id, /^[0-9A-F]{32}$/);
      assert.deepEqual(lastEvent(), {
        type: 'message',
        message: {
          id,
          source: { chat: jidOf(PEER), sender: jidOf(PEER), isFromMe: false, isGroup: false },
          pushName: 'Bea',
          timestamp: Date.parse('2025-04-01T08:00:00.000Z'),
          content: { kind: 'text', text: 'Hello!' },
        },
      });
      const row = await messageRow(t, id);
      assert.equal(row?.from_me, 0);
      assert.equal(row?.state, 'delivered');
      assert.equal(row?.push_name, 'Bea');
      assert.equal(row?.timestamp, Date.parse('2025-04-01T08:00:00.000Z'), 'the message time, epoch ms');
      const defaults = await t.call('POST', '/v1/sandbox/inbound', { phone: THIRD, body: 'hey' });
      assert.equal((await messageRow(t, defaults.body.data.id))?.push_name, 'Carla', 'the defined push name');
      const plain = await t.call('POST', '/v1/sandbox/inbound', { phone: '5511999990004', body: 'yo' });
      assert.equal(
        (await messageRow(t, plain.body.data.id))?.push_name,
        'User 0004',
        'the default world name',
      );
    });

    it('inbound: validation, unregistered senders, the account itself', async () => {
      const inbound = (body: unknown) => t.call('POST', '/v1/sandbox/inbound', body);
      assert.deepEqual((await inbound({ body: 'x' })).body, bad(400, 'phone is required'));
      assert.deepEqual((await inbound({ phone: PEER })).body, bad(400, 'body is required'));
      assert.deepEqual(
        (await inbound({ phone: PEER, body: 'x', groupJid: 'nope' })).body,
        bad(400, 'groupJid must be a group JID: <digits>@g.us'),
      );
      assert.deepEqual(
        (await inbound({ phone: UNREGISTERED, body: 'x' })).body,
        bad(422, `phone ${UNREGISTERED} is not registered on the platform`),
      );
      assert.deepEqual(
        (await inbound({ phone: OWN, body: 'x' })).body,
        bad(400, 'phone must be another user than this instance'),
      );
    });

    it('groups: a group by another user with this instance as a plain member (Group info fields)', async () => {
      t.clock.set(Date.parse('2025-04-02T09:30:00.000Z'));
      const res = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Book club',
        ownerPhone: PEER,
        participants: [THIRD, OWN],
      });
      assert.equal(res.status, 200);
      const group = res.body.data;
      assert.match(group.jid, /^120363\d{12}@g\.us$/);
      assert.deepEqual(group, {
        jid: group.jid,
        name: 'Book club',
        topic: '',
        ownerJid: jidOf(PEER),
        groupCreated: '2025-04-02T09:30:00.000Z',
        nameSetAt: '2025-04-02T09:30:00.000Z',
        nameSetBy: jidOf(PEER),
        isAnnounce: false,
        isLocked: false,
        isEphemeral: false,
        disappearingTimer: 0,
        participants: [
          { jid: jidOf(PEER), isAdmin: true, isSuperAdmin: true },
          { jid: jidOf(THIRD), isAdmin: false, isSuperAdmin: false },
          { jid: jidOf(OWN), isAdmin: false, isSuperAdmin: false },
        ],
      });
      const session = t.services.sessions.existing(t.instance.id);
      await assert.rejects(session?.groupInviteCode(group.jid) ?? Promise.reject(new Error('no session')), {
        code: 'forbidden',
        message: 'you must be a group admin to get the invite link',
      });
      const groups = await t.call('POST', '/v1/sandbox/groups', {
        name: 'x'.repeat(26),
        ownerPhone: PEER,
        participants: [],
      });
      assert.deepEqual(groups.body, bad(400, 'name must be at most 25 characters'));
      const unregistered = await t.call('POST', '/v1/sandbox/groups', {
        name: 'G',
        ownerPhone: PEER,
        participants: [UNREGISTERED],
      });
      assert.deepEqual(
        unregistered.body,
        bad(422, `participant ${UNREGISTERED} is not registered on the platform`),
      );
      const self = await t.call('POST', '/v1/sandbox/groups', {
        name: 'G',
        ownerPhone: OWN,
        participants: [],
      });
      assert.deepEqual(self.body, bad(400, 'ownerPhone must be another user than this instance'));
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/groups', { name: 'G', ownerPhone: PEER })).body,
        bad(400, 'participants is required'),
      );

      const inGroup = await t.call('POST', '/v1/sandbox/inbound', {
        phone: THIRD,
        body: 'hi all',
        groupJid: group.jid,
      });
      assert.equal(inGroup.status, 200);
      const event = lastEvent();
      assert.ok(event?.type === 'message');
      assert.deepEqual(event.message.source, {
        chat: group.jid,
        sender: jidOf(THIRD),
        isFromMe: false,
        isGroup: true,
      });
      const outsider = await t.call('POST', '/v1/sandbox/inbound', {
        phone: '5511999990005',
        body: 'x',
        groupJid: group.jid,
      });
      assert.deepEqual(outsider.body, bad(422, 'phone 5511999990005 is not a participant of the group'));
      const unknown = await t.call('POST', '/v1/sandbox/inbound', {
        phone: PEER,
        body: 'x',
        groupJid: '120363999999999999@g.us',
      });
      assert.deepEqual(unknown.body, bad(404, 'group not found'));
    });

    it('receipt: sent → delivered → read → played in the store, never backwards; a ReadReceipt each time', async () => {
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'track me' });
      const id = sent.body.data.id;
      const state = async () => (await messageRow(t, id))?.state;
      assert.equal(await state(), 'sent');
      for (const next of ['delivered', 'read', 'played'] as const) {
        const res = await t.call('POST', '/v1/sandbox/receipt', { id, state: next });
        assert.deepEqual(res.body, { success: true, code: 200, data: { details: `Receipt ${next} sent` } });
        assert.equal(await state(), next);
        assert.deepEqual(lastEvent(), {
          type: 'receipt',
          state: next,
          messageIds: [id],
          source: { chat: jidOf(PEER), sender: jidOf(PEER), isFromMe: false, isGroup: false },
          timestamp: t.clock(),
        });
      }
      await t.call('POST', '/v1/sandbox/receipt', { id, state: 'delivered' });
      assert.equal(await state(), 'played', 'a late delivered receipt does not move it back');
      assert.equal(lastEvent()?.type, 'receipt', 'the event is still reported');

      const other = (await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'skip' })).body.data.id;
      await t.call('POST', '/v1/sandbox/receipt', { id: other, state: 'read' });
      assert.equal((await messageRow(t, other))?.state, 'read', 'a read receipt may skip delivered');
    });

    it('receipt: 404 for an unknown id or a received message; validation; group members', async () => {
      const unknown = await t.call('POST', '/v1/sandbox/receipt', {
        id: '3EB0FFFFFFFFFFFFFFFFFF',
        state: 'read',
      });
      assert.deepEqual(unknown.body, bad(404, 'message not found'));
      const received = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'x' });
      const notSent = await t.call('POST', '/v1/sandbox/receipt', {
        id: received.body.data.id,
        state: 'read',
      });
      assert.deepEqual(notSent.body, bad(404, 'message not found'));
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/receipt', { id: 'X', state: 'seen' })).body,
        bad(400, 'state must be one of delivered, read, played'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/receipt', { state: 'read' })).body,
        bad(400, 'id is required'),
      );

      const group = (
        await t.call('POST', '/v1/sandbox/groups', { name: 'Duo', ownerPhone: PEER, participants: [THIRD] })
      ).body.data.jid;
      const mine = (await t.call('POST', '/v1/messages/send', { phone: group, body: 'hi group' })).body.data
        .id;
      await t.call('POST', '/v1/sandbox/receipt', { id: mine, state: 'delivered' });
      const first = lastEvent();
      assert.ok(first?.type === 'receipt');
      assert.deepEqual(first.source, { chat: group, sender: jidOf(PEER), isFromMe: false, isGroup: true });
      await t.call('POST', '/v1/sandbox/receipt', { id: mine, state: 'read', phone: THIRD });
      const second = lastEvent();
      assert.ok(second?.type === 'receipt');
      assert.equal(second.source.sender, jidOf(THIRD));
      const outsider = await t.call('POST', '/v1/sandbox/receipt', {
        id: mine,
        state: 'read',
        phone: '5511999990005',
      });
      assert.deepEqual(outsider.body, bad(422, 'phone 5511999990005 is not a participant of the group'));
    });

    it('presence: composing, recording (composing + audio) and paused, in a chat or a group', async () => {
      const expected = {
        composing: ['composing', ''],
        recording: ['composing', 'audio'],
        paused: ['paused', ''],
      } as const;
      for (const [state, [reported, media]] of Object.entries(expected)) {
        const res = await t.call('POST', '/v1/sandbox/presence', { phone: PEER, state });
        assert.deepEqual(res.body, { success: true, code: 200, data: { details: `Presence ${state} sent` } });
        assert.deepEqual(lastEvent(), {
          type: 'presence',
          source: { chat: jidOf(PEER), sender: jidOf(PEER), isFromMe: false, isGroup: false },
          state: reported,
          media,
        });
      }
      const group = (
        await t.call('POST', '/v1/sandbox/groups', { name: 'P', ownerPhone: PEER, participants: [] })
      ).body.data.jid;
      await t.call('POST', '/v1/sandbox/presence', { phone: PEER, state: 'recording', groupJid: group });
      assert.deepEqual(lastEvent(), {
        type: 'presence',
        source: { chat: group, sender: jidOf(PEER), isFromMe: false, isGroup: true },
        state: 'composing',
        media: 'audio',
      });
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/presence', { phone: PEER, state: 'typing' })).body,
        bad(400, 'state must be one of composing, recording, paused'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/presence', { phone: UNREGISTERED, state: 'paused' })).body,
        bad(422, `phone ${UNREGISTERED} is not registered on the platform`),
      );
    });

    it('users: definitions override the default world (registration, names) and validate their fields', async () => {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      await t.call('POST', '/v1/sandbox/users', {
        phone: '5511999980000',
        registered: true,
        pushName: 'Zero',
      });
      await t.call('POST', '/v1/sandbox/users', { phone: '5511999980001', registered: false });
      await t.call('POST', '/v1/sandbox/users', {
        phone: '5511999980002',
        firstName: 'Dani',
        fullName: 'Dani Lima',
        businessName: 'Lima Co',
        verifiedName: 'Lima Company',
      });
      assert.deepEqual(await session.checkPhones(['5511999980000', '5511999980001', '5511999980002']), [
        { query: '5511999980000', isInPlatform: true, jid: jidOf('5511999980000'), verifiedName: '' },
        { query: '5511999980001', isInPlatform: false, jid: null, verifiedName: '' },
        {
          query: '5511999980002',
          isInPlatform: true,
          jid: jidOf('5511999980002'),
          verifiedName: 'Lima Company',
        },
      ]);
      const contacts = await session.contacts();
      assert.deepEqual(
        contacts.find((c) => c.jid === jidOf('5511999980002')),
        {
          jid: jidOf('5511999980002'),
          businessName: 'Lima Co',
          firstName: 'Dani',
          fullName: 'Dani Lima',
          pushName: 'User 0002',
        },
      );
      assert.equal(
        contacts.some((c) => c.jid === jidOf('5511999980001')),
        false,
        'unregistered users are not contacts',
      );
      const res = await t.call('POST', '/v1/sandbox/users', { phone: '123', registered: true });
      assert.deepEqual(res.body, bad(400, 'phone must be digits only, international format, no leading +'));
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/users', { phone: PEER, registered: 'no' })).body,
        bad(400, 'registered must be a boolean'),
      );
    });

    it('exists only for test keys (a live key gets 404) and needs chat:session', async () => {
      const live = await t.newKey({ env: 'live' });
      const res = await t.call(
        'POST',
        '/v1/sandbox/inbound',
        { phone: PEER, body: 'x' },
        { authorization: `Bearer ${live}` },
      );
      assert.deepEqual(res.body, bad(404, 'sandbox helpers exist only for svc_test_ keys'));
      const messagesOnly = await t.newKey({ scopes: ['chat:messages'] });
      const scoped = await t.call(
        'POST',
        '/v1/sandbox/users',
        { phone: PEER },
        { authorization: `Bearer ${messagesOnly}` },
      );
      assert.deepEqual(scoped.body, bad(403, 'API key lacks required scope chat:session'));
    });
  });
}
