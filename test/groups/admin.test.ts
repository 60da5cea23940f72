/**
 * Group administration through the HTTP API on the sandbox: participants (per-participant results with the
 * platform's codes), name / topic / settings / timer, revoke, leave and join by link or bare code, their
 * validation, and the GroupUpdate webhook rows each change records.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, bad, OWN } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const OWN_JID = `${OWN}@s.whatsapp.net`;
const ANA = '5511988887777';
const BIA = '5511966665555';
const CAIO = '5511955554444';
const UNREGISTERED = '5511977770000';
const INVITE_BASE = 'https://chat.whatsapp.com/';
const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;

/** The `GroupUpdate` webhook bodies recorded for the app's instance, in sequence order. */
async function groupUpdates(t: TestApp): Promise<any[]> {
  const rows = await t.services.store.db
    .selectFrom('webhook_events')
    .select(['payload'])
    .where('instance_id', '=', t.instance.id)
    .where('type', '=', 'GroupUpdate')
    .orderBy('sequence')
    .execute();
  return rows.map((row) => JSON.parse(row.payload));
}

for (const dialect of testDialects()) {
  describe(`group administration routes and GroupUpdate events [${dialect}]`, () => {
    let t: TestApp;
    let group: string;
    let seen = 0;
    let currentLink = '';
    /** The GroupUpdate events recorded since the last call, as their `event` objects. */
    const newUpdates = async () => {
      const all = await groupUpdates(t);
      const fresh = all.slice(seen);
      seen = all.length;
      return fresh.map((body) => body.event);
    };
    const post = (path: string, body: unknown) => t.call('POST', path, body);
    before(async () => {
      t = await appFor(dialect, { env: { INVITE_BASE_URL: INVITE_BASE } });
    });
    after(() => t.close());

    it('answers 409 on every operation before login', async () => {
      const g = '120363000000000001@g.us';
      const calls = [
        await post('/v1/groups/participants', { groupJid: g, action: 'add', participants: [ANA] }),
        await post('/v1/groups/update', { groupJid: g, name: 'X' }),
        await post('/v1/groups/leave', { groupJid: g }),
        await post('/v1/groups/join', { inviteLink: 'AbCdEfGhIjK1234567890' }),
        await post('/v1/groups/invite-link/revoke', { groupJid: g }),
      ];
      for (const res of calls) assert.deepEqual(res.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
      const connect = await post('/v1/session/connect', {
        subscribe: ['Message', 'GroupUpdate'],
      });
      assert.equal(connect.status, 200);
      const created = await post('/v1/groups/create', { name: 'Team', participants: [ANA] });
      group = created.body.data.jid;
    });

    it('participants add: one result per number, with the platform code; a GroupUpdate for those added', async () => {
      t.clock.set(Date.parse('2026-02-01T10:00:00.000Z'));
      const res = await post('/v1/groups/participants', {
        groupJid: group,
        action: 'add',
        participants: [BIA, ANA, UNREGISTERED, BIA],
      });
      assert.deepEqual(res.body, {
        success: true,
        code: 200,
        data: {
          participants: [
            { phone: BIA, status: 'added', code: 200 },
            { phone: ANA, status: 'already-in-group', code: 409 },
            { phone: UNREGISTERED, status: 'not-registered', code: 404 },
          ],
        },
      });
      assert.deepEqual(await newUpdates(), [
        {
          groupJid: group,
          action: 'add',
          actor: OWN_JID,
          participants: [jidOf(BIA)],
          timestamp: '2026-02-01T10:00:00.000Z',
        },
      ]);
      const rows = await groupUpdates(t);
      assert.equal(rows.at(-1).type, 'GroupUpdate');
      assert.equal(rows.at(-1).instanceId, t.instance.id);
    });

    it('promote, demote, remove: per-participant statuses; the creator may not be removed', async () => {
      const act = async (action: string, participants: string[]) =>
        (await post('/v1/groups/participants', { groupJid: group, action, participants })).body.data
          .participants;
      assert.deepEqual(await act('promote', [BIA, CAIO]), [
        { phone: BIA, status: 'promoted', code: 200 },
        { phone: CAIO, status: 'not-in-group', code: 404 },
      ]);
      let info = (await t.call('GET', `/v1/groups/info?groupJid=${group}`)).body.data;
      assert.deepEqual(
        info.participants.find((p: any) => p.jid === jidOf(BIA)),
        { jid: jidOf(BIA), isAdmin: true, isSuperAdmin: false },
      );
      assert.deepEqual(await act('demote', [BIA, OWN]), [
        { phone: BIA, status: 'demoted', code: 200 },
        { phone: OWN, status: 'not-allowed', code: 406 },
      ]);
      assert.deepEqual(await act('remove', [BIA]), [{ phone: BIA, status: 'removed', code: 200 }]);
      info = (await t.call('GET', `/v1/groups/info?groupJid=${group}`)).body.data;
      assert.deepEqual(
        info.participants.map((p: any) => p.jid),
        [OWN_JID, jidOf(ANA)],
      );
      const updates = await newUpdates();
      assert.deepEqual(
        updates.map((u) => [u.action, u.actor, u.participants]),
        [
          ['promote', OWN_JID, [jidOf(BIA)]],
          ['demote', OWN_JID, [jidOf(BIA)]],
          ['remove', OWN_JID, [jidOf(BIA)]],
        ],
      );
    });

    it('participants: validates the body', async () => {
      const call = (body: unknown) => post('/v1/groups/participants', body);
      assert.deepEqual(
        (await call({ groupJid: group, action: 'kick', participants: [ANA] })).body,
        bad(400, 'action must be one of add, remove, promote, demote'),
      );
      assert.deepEqual(
        (await call({ groupJid: group, action: 'add', participants: [] })).body,
        bad(400, 'participants must have at least 1 item'),
      );
      assert.deepEqual(
        (await call({ groupJid: group, action: 'add', participants: ['+5511'] })).body,
        bad(400, 'participants[0] must be digits only, international format, no leading +'),
      );
      assert.deepEqual(
        (await call({ groupJid: 'team', action: 'add', participants: [ANA] })).body,
        bad(400, 'groupJid must be a group JID: <digits>@g.us or <digits>-<digits>@g.us'),
      );
      assert.deepEqual(
        (await call({ groupJid: '120363000000000009@g.us', action: 'add', participants: [ANA] })).body,
        bad(404, 'group 120363000000000009@g.us not found'),
      );
    });

    it('update: name, topic, announce, locked and timer, answered with the group; one GroupUpdate each', async () => {
      t.clock.set(Date.parse('2026-02-01T11:00:00.000Z'));
      const res = await post('/v1/groups/update', {
        groupJid: group,
        name: 'Team 2026',
        topic: 'Shifts and orders',
        announce: true,
        locked: true,
        disappearingTimer: 604800,
      });
      assert.equal(res.status, 200);
      const data = res.body.data;
      assert.deepEqual(
        [data.name, data.topic, data.isAnnounce, data.isLocked, data.isEphemeral, data.disappearingTimer],
        ['Team 2026', 'Shifts and orders', true, true, true, 604800],
      );
      assert.equal(data.nameSetAt, '2026-02-01T11:00:00.000Z');
      assert.equal(data.nameSetBy, OWN_JID);
      const base = {
        groupJid: group,
        actor: OWN_JID,
        participants: [],
        timestamp: '2026-02-01T11:00:00.000Z',
      };
      assert.deepEqual(await newUpdates(), [
        { ...base, action: 'subject', name: 'Team 2026' },
        { ...base, action: 'description', topic: 'Shifts and orders' },
        { ...base, action: 'announce', isAnnounce: true },
        { ...base, action: 'locked', isLocked: true },
        { ...base, action: 'ephemeral', disappearingTimer: 604800 },
      ]);
      const off = await post('/v1/groups/update', { groupJid: group, disappearingTimer: 0, topic: '' });
      assert.deepEqual([off.body.data.isEphemeral, off.body.data.topic], [false, '']);
      assert.deepEqual(
        (await newUpdates()).map((u) => [u.action, u.topic ?? u.disappearingTimer]),
        [
          ['description', ''],
          ['ephemeral', 0],
        ],
      );
    });

    it('update: validates name, timer and that something changes', async () => {
      const call = (body: unknown) => post('/v1/groups/update', { groupJid: group, ...(body as object) });
      assert.deepEqual(
        (await call({})).body,
        bad(400, 'give at least one of name, topic, announce, locked, disappearingTimer'),
      );
      assert.deepEqual(
        (await call({ name: 'x'.repeat(26) })).body,
        bad(400, 'name must be at most 25 characters'),
      );
      assert.deepEqual((await call({ name: '  ' })).body, bad(400, 'name must not be blank'));
      assert.deepEqual(
        (await call({ disappearingTimer: 3600 })).body,
        bad(400, 'disappearingTimer must be one of 0, 86400, 604800, 7776000 (seconds)'),
      );
      assert.deepEqual((await call({ locked: 'yes' })).body, bad(400, 'locked must be a boolean'));
      assert.deepEqual(await newUpdates(), []);
    });

    it('revoke: a new link; the old one no longer joins', async () => {
      const before = (await t.call('GET', `/v1/groups/invite-link?groupJid=${group}`)).body.data.inviteLink;
      const res = await post('/v1/groups/invite-link/revoke', { groupJid: group });
      assert.equal(res.status, 200);
      const link = res.body.data.inviteLink;
      assert.match(link, /^https:\/\/chat\.whatsapp\.com\/[A-Za-z0-9]{22}$/);
      assert.notEqual(link, before);
      const now = (await t.call('GET', `/v1/groups/invite-link?groupJid=${group}`)).body.data.inviteLink;
      assert.equal(now, link);
      await post('/v1/groups/leave', { groupJid: group });
      assert.deepEqual(
        (await post('/v1/groups/join', { inviteLink: before })).body,
        bad(404, 'invite link not found: it may have been revoked'),
      );
      const joined = await post('/v1/groups/join', { inviteLink: link.slice(INVITE_BASE.length) });
      assert.deepEqual(joined.body, { success: true, code: 200, data: { groupJid: group } });
      currentLink = link;
    });

    it('leave and join: the account is gone, then back as a plain member; by link or bare code', async () => {
      await newUpdates();
      // Back as a plain member after the rejoin above: no longer an admin.
      assert.deepEqual(
        (await post('/v1/groups/invite-link/revoke', { groupJid: group })).body,
        bad(403, 'you must be a group admin to revoke the invite link'),
      );
      const left = await post('/v1/groups/leave', { groupJid: group });
      assert.deepEqual(left.body, { success: true, code: 200, data: { details: 'Left the group' } });
      assert.deepEqual(
        (await t.call('GET', `/v1/groups/info?groupJid=${group}`)).body,
        bad(404, `group ${group} not found`),
      );
      assert.deepEqual(
        (await post('/v1/groups/leave', { groupJid: group })).body,
        bad(404, `group ${group} not found`),
      );
      assert.deepEqual(
        (await post('/v1/groups/join', { inviteLink: 'https://chat.whatsapp.com/' })).body,
        bad(400, 'inviteLink must be an invite link (https://chat.whatsapp.com/CODE) or its code'),
      );
      assert.deepEqual(
        (await post('/v1/groups/join', { inviteLink: 'not a link' })).body,
        bad(400, 'inviteLink must be an invite link (https://chat.whatsapp.com/CODE) or its code'),
      );
      const again = await post('/v1/groups/join', { inviteLink: currentLink });
      assert.deepEqual(again.body, { success: true, code: 200, data: { groupJid: group } });
      const info = (await t.call('GET', `/v1/groups/info?groupJid=${group}`)).body.data;
      assert.deepEqual(
        info.participants.find((p: any) => p.jid === OWN_JID),
        { jid: OWN_JID, isAdmin: false, isSuperAdmin: false },
      );
      const updates = await newUpdates();
      assert.deepEqual(
        updates.map((u) => [u.action, u.actor, u.participants]),
        [
          ['leave', OWN_JID, [OWN_JID]],
          ['join', OWN_JID, [OWN_JID]],
        ],
      );
    });
  });
}
