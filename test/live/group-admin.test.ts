/**
 * Group administration with a live key, end to end against the platform simulator: every operation through
 * parley's HTTP API (participants add / remove / promote / demote with per-participant results, name, topic,
 * announce, locked, disappearing timer, leave, join by link, revoke) asserted on the simulator's view of the
 * group; the platform's refusal of a plain member as 403; and changes made by simulated members (control API)
 * arriving as GroupUpdate webhooks with phone JIDs. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL
 * is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

/** The simulator's view of a group (GET /control/groups/{jid}). */
interface SimGroup {
  jid: string;
  subject: string;
  inviteCode: string;
  description: string;
  announce: boolean;
  locked: boolean;
  ephemeral: number;
  participants: { phone: string; lid: string; role: string }[];
}

const shop = '5511999990011';
const ana = '5511988887777';
const bruno = '5511977776666';
const carla = '5511966665555';
const dora = '5511955554444';
const nobody = '5511944443333';
const jid = (phone: string) => `${phone}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`group administration through parley's API against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    let team = '';
    let carlas = '';

    const live = (url: string, body?: unknown) => app.live('POST', url, body);
    const simGroup = async (groupJid: string) =>
      (await control(sim, 'GET', `/groups/${groupJid}`)).body as SimGroup;
    const roles = async (groupJid: string) =>
      (await simGroup(groupJid)).participants.map((p) => [p.phone, p.role]);
    /** The GroupUpdate webhook events received so far. */
    const updates = () =>
      bodies(receiver.requests)
        .filter((b: any) => b.type === 'GroupUpdate')
        .map((b: any) => b.event);
    const update = (what: string, predicate: (e: any) => boolean) =>
      until(`GroupUpdate ${what}`, () => updates().find(predicate));

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
        [bruno, 'Bruno'],
        [carla, 'Carla'],
        [dora, 'Dora'],
      ]) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      const connect = await live('/v1/session/connect', { subscribe: ['Message', 'GroupUpdate'] });
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      const created = await live('/v1/groups/create', { name: 'Team', participants: [ana, bruno] });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      team = created.body.data.jid;
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('participants add: the platform decides per participant; the simulator holds the new member', async () => {
      const res = await live('/v1/groups/participants', {
        groupJid: team,
        action: 'add',
        participants: [carla, ana, nobody],
      });
      assert.deepEqual(res.body, {
        success: true,
        code: 200,
        data: {
          participants: [
            { phone: carla, status: 'added', code: 200 },
            { phone: ana, status: 'already-in-group', code: 409 },
            { phone: nobody, status: 'not-registered', code: 404 },
          ],
        },
      });
      assert.deepEqual(await roles(team), [
        [shop, 'superadmin'],
        [ana, 'member'],
        [bruno, 'member'],
        [carla, 'member'],
      ]);
      const added = await update('add', (e) => e.groupJid === team && e.action === 'add');
      assert.deepEqual(
        { actor: added.actor, participants: added.participants },
        { actor: jid(shop), participants: [jid(carla)] },
      );
    });

    it('promote, demote and remove reach the simulator; the creator may not be demoted', async () => {
      const act = async (action: string, participants: string[]) => {
        const res = await live('/v1/groups/participants', { groupJid: team, action, participants });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body.data.participants;
      };
      assert.deepEqual(await act('promote', [ana]), [{ phone: ana, status: 'promoted', code: 200 }]);
      assert.deepEqual((await roles(team))[1], [ana, 'admin']);
      assert.deepEqual(await act('demote', [ana, shop]), [
        { phone: ana, status: 'demoted', code: 200 },
        { phone: shop, status: 'not-allowed', code: 406 },
      ]);
      assert.deepEqual((await roles(team))[1], [ana, 'member']);
      assert.deepEqual(await act('remove', [bruno, dora]), [
        { phone: bruno, status: 'removed', code: 200 },
        { phone: dora, status: 'not-in-group', code: 404 },
      ]);
      assert.deepEqual(
        (await roles(team)).map(([phone]) => phone),
        [shop, ana, carla],
      );
      const removed = await update('remove', (e) => e.groupJid === team && e.action === 'remove');
      assert.deepEqual(removed.participants, [jid(bruno)]);
      const promoted = await update('promote', (e) => e.groupJid === team && e.action === 'promote');
      assert.deepEqual([promoted.actor, promoted.participants], [jid(shop), [jid(ana)]]);
    });

    it('update: name, topic, announce, locked and timer on the simulator; answered with the group', async () => {
      const res = await live('/v1/groups/update', {
        groupJid: team,
        name: 'Team 2026',
        topic: 'Shifts and orders',
        announce: true,
        locked: true,
        disappearingTimer: 604800,
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const group = await simGroup(team);
      assert.deepEqual(
        [group.subject, group.description, group.announce, group.locked, group.ephemeral],
        ['Team 2026', 'Shifts and orders', true, true, 604800],
      );
      const data = res.body.data;
      assert.deepEqual(
        [data.name, data.topic, data.isAnnounce, data.isLocked, data.isEphemeral, data.disappearingTimer],
        ['Team 2026', 'Shifts and orders', true, true, true, 604800],
      );
      assert.equal(data.nameSetBy, jid(shop));
      const eph = await update('ephemeral', (e) => e.groupJid === team && e.action === 'ephemeral');
      assert.equal(eph.disappearingTimer, 604800);
      const subject = await update('subject', (e) => e.groupJid === team && e.action === 'subject');
      assert.deepEqual([subject.actor, subject.name], [jid(shop), 'Team 2026']);
      const cleared = await live('/v1/groups/update', { groupJid: team, topic: '', disappearingTimer: 0 });
      assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
      const after = await simGroup(team);
      assert.deepEqual([after.description, after.ephemeral], ['', 0]);
      assert.deepEqual([cleared.body.data.topic, cleared.body.data.isEphemeral], ['', false]);
    });

    it('revoke: the new link carries the simulator’s new code', async () => {
      const before = (await simGroup(team)).inviteCode;
      const res = await live('/v1/groups/invite-link/revoke', { groupJid: team });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const code = (await simGroup(team)).inviteCode;
      assert.notEqual(code, before);
      assert.equal(res.body.data.inviteLink, `https://chat.whatsapp.com/${code}`);
    });

    it('a plain member gets 403 for admin changes (checked before the platform is asked)', async () => {
      const made = await control(sim, 'POST', '/groups', {
        creator: carla,
        subject: 'Carla news',
        participants: [shop, ana],
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      carlas = made.body.jid;
      const refused = (message: string) => ({ error: { code: 403, message } });
      assert.deepEqual(
        (await live('/v1/groups/participants', { groupJid: carlas, action: 'add', participants: [dora] }))
          .body,
        refused('you must be a group admin to add participants'),
      );
      assert.deepEqual(
        (await live('/v1/groups/update', { groupJid: carlas, locked: true })).body,
        refused('you must be a group admin to change the group settings'),
      );
      assert.deepEqual(
        (await live('/v1/groups/invite-link/revoke', { groupJid: carlas })).body,
        refused('you must be a group admin to revoke the invite link'),
      );
      assert.deepEqual(
        (await roles(carlas)).map(([phone]) => phone),
        [carla, shop, ana],
      );
    });

    it('changes by simulated members arrive as GroupUpdate webhooks with phone JIDs', async () => {
      const add = await control(sim, 'POST', `/groups/${carlas}/participants`, {
        actor: carla,
        action: 'add',
        participants: [dora],
      });
      assert.equal(add.status, 200, JSON.stringify(add.body));
      assert.deepEqual(add.body.results, [{ phone: dora, code: 200 }]);
      const promote = await control(sim, 'POST', `/groups/${carlas}/participants`, {
        actor: carla,
        action: 'promote',
        participants: [shop],
      });
      assert.equal(promote.status, 200, JSON.stringify(promote.body));
      const settings = await control(sim, 'POST', `/groups/${carlas}`, {
        actor: carla,
        subject: 'Carla weekly',
        announce: true,
        ephemeral: 86400,
      });
      assert.equal(settings.status, 200, JSON.stringify(settings.body));
      const leave = await control(sim, 'POST', `/groups/${carlas}/participants`, {
        actor: dora,
        action: 'leave',
      });
      assert.equal(leave.status, 200, JSON.stringify(leave.body));
      const of = (action: string) => update(action, (e) => e.groupJid === carlas && e.action === action);
      const event = (e: any) => {
        const { timestamp, ...rest } = e;
        assert.match(timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.000Z$/);
        return rest;
      };
      const base = { groupJid: carlas, actor: jid(carla), participants: [] };
      assert.deepEqual(event(await of('add')), { ...base, action: 'add', participants: [jid(dora)] });
      assert.deepEqual(event(await of('promote')), { ...base, action: 'promote', participants: [jid(shop)] });
      assert.deepEqual(event(await of('subject')), { ...base, action: 'subject', name: 'Carla weekly' });
      assert.deepEqual(event(await of('announce')), { ...base, action: 'announce', isAnnounce: true });
      assert.deepEqual(event(await of('ephemeral')), {
        ...base,
        action: 'ephemeral',
        disappearingTimer: 86400,
      });
      assert.deepEqual(event(await of('leave')), {
        groupJid: carlas,
        action: 'leave',
        actor: jid(dora),
        participants: [jid(dora)],
      });
      // Promoted by Carla, the account may now change the settings itself.
      const locked = await live('/v1/groups/update', { groupJid: carlas, locked: true });
      assert.equal(locked.status, 200, JSON.stringify(locked.body));
      assert.equal((await simGroup(carlas)).locked, true);
    });

    it('leave, then join by the invite link: the simulator sees both; so do the webhooks', async () => {
      const left = await live('/v1/groups/leave', { groupJid: carlas });
      assert.deepEqual(left.body, { success: true, code: 200, data: { details: 'Left the group' } });
      assert.deepEqual(
        (await roles(carlas)).map(([phone]) => phone),
        [carla, ana],
      );
      assert.equal((await app.live('GET', `/v1/groups/info?groupJid=${carlas}`)).status, 404);
      const code = (await simGroup(carlas)).inviteCode;
      assert.deepEqual(
        (await live('/v1/groups/join', { inviteLink: 'https://chat.whatsapp.com/AAAAAAAAAAAAAAAAAAAAAA' }))
          .body,
        {
          error: { code: 404, message: 'invite link not found: it may have been revoked' },
        },
      );
      const joined = await live('/v1/groups/join', { inviteLink: `https://chat.whatsapp.com/${code}` });
      assert.deepEqual(joined.body, { success: true, code: 200, data: { groupJid: carlas } });
      assert.deepEqual(await roles(carlas), [
        [carla, 'superadmin'],
        [ana, 'member'],
        [shop, 'member'],
      ]);
      const leave = await update(
        'own leave',
        (e) => e.groupJid === carlas && e.action === 'leave' && e.actor === jid(shop),
      );
      assert.deepEqual(leave.participants, [jid(shop)]);
      const join = await update('own join', (e) => e.groupJid === carlas && e.action === 'join');
      assert.deepEqual([join.actor, join.participants], [jid(shop), [jid(shop)]]);
    });
  });
}
