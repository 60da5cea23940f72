/**
 * Group changes by simulated members on the sandbox (POST /v1/sandbox/groups/participants and /update): each
 * change is a GroupUpdate event with the member as actor; the platform's rules apply to members and to the
 * account (a plain member gets 403 for admin changes, and for info edits once the group is locked).
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
  describe(`sandbox group helpers and a plain member's rights [${dialect}]`, () => {
    let t: TestApp;
    let seen = 0;
    /** The GroupUpdate events recorded since the last call, as their `event` objects. */
    const newUpdates = async () => {
      const all = await groupUpdates(t);
      const fresh = all.slice(seen);
      seen = all.length;
      return fresh.map((body) => body.event);
    };
    const post = (path: string, body: unknown) => t.call('POST', path, body);
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('a plain member gets 403 for admin changes; may edit the info until the group is locked', async () => {
      const foreign = await post('/v1/sandbox/groups', {
        name: 'Neighbours',
        ownerPhone: ANA,
        participants: [BIA],
      });
      const g = foreign.body.data.jid;
      const link = (
        await post('/v1/groups/participants', { groupJid: g, action: 'add', participants: [CAIO] })
      ).body;
      assert.deepEqual(link, bad(403, 'you must be a group admin to add participants'));
      assert.deepEqual(
        (await post('/v1/groups/update', { groupJid: g, announce: true })).body,
        bad(403, 'you must be a group admin to change the group settings'),
      );
      assert.deepEqual(
        (await post('/v1/groups/invite-link/revoke', { groupJid: g })).body,
        bad(403, 'you must be a group admin to revoke the invite link'),
      );
      const renamed = await post('/v1/groups/update', { groupJid: g, name: 'Street' });
      assert.equal(renamed.body.data.name, 'Street');
      const locked = await post('/v1/sandbox/groups/update', { groupJid: g, phone: ANA, locked: true });
      assert.equal(locked.body.data.isLocked, true);
      assert.deepEqual(
        (await post('/v1/groups/update', { groupJid: g, topic: 'Quiet street' })).body,
        bad(403, 'you must be a group admin to edit the info of this group: only admins may edit it'),
      );
      const updates = await newUpdates();
      assert.deepEqual(
        updates.map((u) => [u.action, u.actor, u.name ?? u.isLocked]),
        [
          ['subject', OWN_JID, 'Street'],
          ['locked', jidOf(ANA), true],
        ],
      );
    });

    it('sandbox helpers: a simulated member changes the group; each change is a GroupUpdate', async () => {
      t.clock.set(Date.parse('2026-02-01T12:00:00.000Z'));
      const foreign = await post('/v1/sandbox/groups', {
        name: 'Club',
        ownerPhone: ANA,
        participants: [BIA],
      });
      const g = foreign.body.data.jid;
      await newUpdates();
      const member = (phone: string, action: string, participants?: string[]) =>
        post('/v1/sandbox/groups/participants', {
          groupJid: g,
          phone,
          action,
          ...(participants ? { participants } : {}),
        });
      assert.equal((await member(ANA, 'add', [CAIO])).status, 200);
      assert.equal((await member(ANA, 'promote', [OWN])).status, 200);
      // Promoted, the account may now add participants itself.
      const added = await post('/v1/groups/participants', {
        groupJid: g,
        action: 'add',
        participants: [UNREGISTERED],
      });
      assert.deepEqual(added.body.data.participants, [
        { phone: UNREGISTERED, status: 'not-registered', code: 404 },
      ]);
      assert.equal((await member(CAIO, 'leave')).status, 200);
      assert.equal((await member(CAIO, 'join')).status, 200);
      assert.equal((await member(ANA, 'demote', [OWN])).status, 200);
      const settings = await post('/v1/sandbox/groups/update', {
        groupJid: g,
        phone: ANA,
        topic: 'Books',
        announce: true,
        disappearingTimer: 86400,
      });
      assert.equal(settings.status, 200);
      assert.deepEqual(
        [settings.body.data.topic, settings.body.data.isAnnounce, settings.body.data.disappearingTimer],
        ['Books', true, 86400],
      );
      assert.equal((await member(ANA, 'remove', [OWN])).status, 200);
      const ana = jidOf(ANA);
      const caio = jidOf(CAIO);
      const base = { groupJid: g, timestamp: '2026-02-01T12:00:00.000Z' };
      assert.deepEqual(await newUpdates(), [
        { ...base, action: 'add', actor: ana, participants: [caio] },
        { ...base, action: 'promote', actor: ana, participants: [OWN_JID] },
        { ...base, action: 'leave', actor: caio, participants: [caio] },
        { ...base, action: 'join', actor: caio, participants: [caio] },
        { ...base, action: 'demote', actor: ana, participants: [OWN_JID] },
        { ...base, action: 'description', actor: ana, participants: [], topic: 'Books' },
        { ...base, action: 'announce', actor: ana, participants: [], isAnnounce: true },
        { ...base, action: 'ephemeral', actor: ana, participants: [], disappearingTimer: 86400 },
        { ...base, action: 'remove', actor: ana, participants: [OWN_JID] },
      ]);
      assert.deepEqual(
        (await t.call('GET', `/v1/groups/info?groupJid=${g}`)).body,
        bad(404, `group ${g} not found`),
      );
    });

    it('sandbox helpers: the acting member must be in the group, and an admin for admin changes', async () => {
      const foreign = await post('/v1/sandbox/groups', {
        name: 'Rules',
        ownerPhone: ANA,
        participants: [BIA],
      });
      const g = foreign.body.data.jid;
      await newUpdates();
      assert.deepEqual(
        (
          await post('/v1/sandbox/groups/participants', {
            groupJid: g,
            phone: BIA,
            action: 'add',
            participants: [CAIO],
          })
        ).body,
        bad(403, `phone ${BIA} must be a group admin to add participants`),
      );
      assert.deepEqual(
        (await post('/v1/sandbox/groups/update', { groupJid: g, phone: BIA, locked: true })).body,
        bad(403, `phone ${BIA} must be a group admin to change the group settings`),
      );
      assert.deepEqual(
        (await post('/v1/sandbox/groups/update', { groupJid: g, phone: CAIO, name: 'Mine' })).body,
        bad(422, `phone ${CAIO} is not a participant of the group`),
      );
      assert.deepEqual(
        (await post('/v1/sandbox/groups/participants', { groupJid: g, phone: BIA, action: 'join' })).body,
        bad(409, `phone ${BIA} is already a participant of the group`),
      );
      assert.deepEqual(
        (await post('/v1/sandbox/groups/participants', { groupJid: g, phone: ANA, action: 'add' })).body,
        bad(400, 'participants is required with action add'),
      );
      assert.deepEqual(await newUpdates(), []);
    });

    it('a self-removal is reported leave, as the live engine reads it', async () => {
      t.clock.set(Date.parse('2026-02-02T12:00:00.000Z'));
      const created = await post('/v1/sandbox/groups', {
        name: 'Self',
        ownerPhone: ANA,
        participants: [BIA, CAIO],
      });
      const g = created.body.data.jid;
      const member = (phone: string, action: string, participants: string[]) =>
        post('/v1/sandbox/groups/participants', { groupJid: g, phone, action, participants });
      assert.equal((await member(ANA, 'promote', [BIA, OWN])).status, 200);
      await newUpdates();
      // A member removes itself through the helper, then the account removes itself: both are the platform's
      // `<remove>` of the actor, which the live engine reports as leave (test/groups/admin-rules.test.ts).
      assert.equal((await member(BIA, 'remove', [BIA])).status, 200);
      const removed = await post('/v1/groups/participants', {
        groupJid: g,
        action: 'remove',
        participants: [OWN],
      });
      assert.deepEqual(removed.body.data.participants, [{ phone: OWN, status: 'removed', code: 200 }]);
      const base = { groupJid: g, timestamp: '2026-02-02T12:00:00.000Z' };
      const bia = jidOf(BIA);
      assert.deepEqual(await newUpdates(), [
        { ...base, action: 'leave', actor: bia, participants: [bia] },
        { ...base, action: 'leave', actor: OWN_JID, participants: [OWN_JID] },
      ]);
    });

    it('a number the helper is given twice is acted on and reported once', async () => {
      const timestamp = '2026-02-03T12:00:00.000Z';
      t.clock.set(Date.parse(timestamp));
      const bia = jidOf(BIA);
      const other = await post('/v1/sandbox/groups', {
        name: 'Twice',
        ownerPhone: ANA,
        participants: [BIA, CAIO],
      });
      const g2 = other.body.data.jid;
      await newUpdates();
      const twice = await post('/v1/sandbox/groups/participants', {
        groupJid: g2,
        phone: ANA,
        action: 'promote',
        participants: [BIA, BIA, CAIO, BIA],
      });
      assert.equal(twice.status, 200, JSON.stringify(twice.body));
      const ana = jidOf(ANA);
      assert.deepEqual(await newUpdates(), [
        {
          groupJid: g2,
          timestamp,
          action: 'promote',
          actor: ana,
          participants: [bia, jidOf(CAIO)],
        },
      ]);
      // A remove of others that names the actor too stays a remove, as the live engine reads it.
      const all = await post('/v1/sandbox/groups/participants', {
        groupJid: g2,
        phone: BIA,
        action: 'remove',
        participants: [CAIO, BIA],
      });
      assert.equal(all.status, 200, JSON.stringify(all.body));
      assert.deepEqual(await newUpdates(), [
        {
          groupJid: g2,
          timestamp,
          action: 'remove',
          actor: bia,
          participants: [jidOf(CAIO), bia],
        },
      ]);
    });
  });
}
