/**
 * The simulator's group administration with a real Baileys 7 client: the `w:g2` administration queries as
 * Baileys sends them (groupParticipantsUpdate with the platform's per-participant codes, groupUpdateSubject,
 * groupUpdateDescription, groupSettingUpdate, groupToggleEphemeral, groupLeave, groupAcceptInvite), read back
 * through groupMetadata; the `w:gp2` notifications Baileys receives for them (group-participants.update,
 * groups.update); the refusal of a plain member; and the control API's refusals for simulated members.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { GroupMetadata } from 'baileys';
import type { Simulator } from '../../sim/simulator.ts';
import {
  type Client,
  control,
  endClient,
  pairClient,
  startTrustedSimulator,
  waitForEvent,
} from './support.ts';

const account = '4930100000011';
const bruno = '4930100000012';
const carla = '4930100000013';
const dora = '4930100000014';
const pn = (phone: string) => `${phone}@s.whatsapp.net`;

/** The platform's error code in what Baileys threw: `data` (assertNodeErrorFree) or the Boom status. */
function boomStatus(error: unknown): number | undefined {
  const boom = error as { data?: unknown; output?: { statusCode?: number } };
  return typeof boom.data === 'number' ? boom.data : boom.output?.statusCode;
}

describe('simulator: group administration with a real Baileys client', () => {
  let sim: Simulator;
  let client: Client;
  let group: GroupMetadata;
  const lid = (phone: string) => `${sim.context.accounts.get(phone)?.lid}@lid`;
  const view = async (jid: string) => (await control(sim, 'GET', `/groups/${jid}`)).body as any;

  before(async () => {
    sim = await startTrustedSimulator();
    for (const [phone, pushName] of [
      [account, 'Shop'],
      [bruno, 'Bruno'],
      [carla, 'Carla'],
      [dora, 'Dora'],
    ]) {
      await control(sim, 'POST', '/users', { phone, pushName });
    }
    client = await pairClient(sim, account);
    group = await client.sock.groupCreate('Team', [pn(bruno)]);
  });
  after(async () => {
    await endClient(client);
    await sim.close();
  });

  it('groupParticipantsUpdate: a code per participant; the change is notified to the account too', async () => {
    const notified = waitForEvent(
      client,
      'group-participants.update',
      (u) => u.action === 'add',
      'the add notification',
    );
    const added = await client.sock.groupParticipantsUpdate(
      group.id,
      [pn(carla), pn(bruno), '4930199999999@s.whatsapp.net'],
      'add',
    );
    assert.deepEqual(
      added.map((r) => [r.jid, r.status]),
      [
        [pn(carla), '200'],
        [pn(bruno), '409'],
        ['4930199999999@s.whatsapp.net', '404'],
      ],
    );
    const update = await notified;
    assert.deepEqual(
      update.participants.map((p) => [p.id, p.phoneNumber]),
      [[lid(carla), pn(carla)]],
    );
    assert.equal(update.author, lid(account));
    const promoted = await client.sock.groupParticipantsUpdate(group.id, [pn(carla), pn(account)], 'promote');
    assert.deepEqual(
      promoted.map((r) => r.status),
      ['200', '200'],
    );
    const demoted = await client.sock.groupParticipantsUpdate(group.id, [pn(account), pn(dora)], 'demote');
    assert.deepEqual(
      demoted.map((r) => r.status),
      ['406', '404'],
    );
    await client.sock.groupParticipantsUpdate(group.id, [pn(bruno)], 'remove');
    assert.deepEqual(
      (await view(group.id)).participants.map((p: { phone: string; role: string }) => [p.phone, p.role]),
      [
        [account, 'superadmin'],
        [carla, 'admin'],
      ],
    );
  });

  it('subject, description, settings and ephemeral: answered, held, and read back by groupMetadata', async () => {
    const renamed = waitForEvent(
      client,
      'groups.update',
      (u) => u.some((g) => g.subject === 'Team 2026'),
      'the subject notification',
    );
    await client.sock.groupUpdateSubject(group.id, 'Team 2026');
    await renamed;
    await client.sock.groupUpdateDescription(group.id, 'Orders and shifts');
    await client.sock.groupSettingUpdate(group.id, 'announcement');
    await client.sock.groupSettingUpdate(group.id, 'locked');
    await client.sock.groupToggleEphemeral(group.id, 604800);
    const meta = await client.sock.groupMetadata(group.id);
    assert.deepEqual(
      [meta.subject, meta.subjectOwnerPn, meta.desc, meta.announce, meta.restrict, meta.ephemeralDuration],
      ['Team 2026', pn(account), 'Orders and shifts', true, true, 604800],
    );
    await client.sock.groupUpdateDescription(group.id, undefined);
    await client.sock.groupToggleEphemeral(group.id, 0);
    await client.sock.groupSettingUpdate(group.id, 'not_announcement');
    const after = await client.sock.groupMetadata(group.id);
    assert.deepEqual([after.desc, after.announce, after.ephemeralDuration], [undefined, false, undefined]);
    await assert.rejects(client.sock.groupToggleEphemeral(group.id, 3600), (e) => boomStatus(e) === 400);
  });

  it('a plain member: 401 for admin changes and for info edits of a locked group', async () => {
    const made = await control(sim, 'POST', '/groups', {
      creator: bruno,
      subject: 'Bruno',
      participants: [account],
    });
    const jid = (made.body as { jid: string }).jid;
    await assert.rejects(
      client.sock.groupParticipantsUpdate(jid, [pn(dora)], 'add'),
      (e) => boomStatus(e) === 401,
    );
    await assert.rejects(client.sock.groupSettingUpdate(jid, 'locked'), (e) => boomStatus(e) === 401);
    await client.sock.groupUpdateSubject(jid, 'Ours');
    assert.equal((await view(jid)).subject, 'Ours');
    assert.equal((await control(sim, 'POST', `/groups/${jid}`, { actor: bruno, locked: true })).status, 200);
    await assert.rejects(client.sock.groupUpdateSubject(jid, 'Mine'), (e) => boomStatus(e) === 401);
  });

  it('groupLeave and groupAcceptInvite: out, then back in by the current code; a revoked code is 404', async () => {
    const code = (await view(group.id)).inviteCode as string;
    await client.sock.groupLeave(group.id);
    await assert.rejects(client.sock.groupMetadata(group.id), (e) => boomStatus(e) === 401);
    await assert.rejects(
      client.sock.groupAcceptInvite('AAAAAAAAAAAAAAAAAAAAAA'),
      (e) => boomStatus(e) === 404,
    );
    assert.equal(await client.sock.groupAcceptInvite(code), group.id);
    const roles = (await view(group.id)).participants.map((p: { phone: string; role: string }) => [
      p.phone,
      p.role,
    ]);
    assert.deepEqual(roles, [
      [carla, 'admin'],
      [account, 'member'],
    ]);
  });

  it('control API: the acting member must be a member, and an admin for admin changes', async () => {
    const at = (path: string, body: unknown) => control(sim, 'POST', `/groups/${group.id}${path}`, body);
    assert.deepEqual(
      (await at('/participants', { actor: account, action: 'add', participants: [dora] })).body,
      {
        error: { code: 403, message: 'actor: must be a group admin to add participants' },
      },
    );
    assert.deepEqual((await at('/participants', { actor: dora, action: 'leave' })).body, {
      error: { code: 409, message: `actor: ${dora} is not a member of ${group.id}` },
    });
    assert.deepEqual((await at('/participants', { actor: account, action: 'join' })).body, {
      error: { code: 409, message: 'actor: already a member of the group' },
    });
    assert.deepEqual((await at('', { actor: carla })).body, {
      error: { code: 400, message: 'body: give one of subject, description, announce, locked, ephemeral' },
    });
    assert.equal((await at('', { actor: carla, ephemeral: 3600 })).status, 400);
    const joined = await at('/participants', { actor: dora, action: 'join' });
    assert.equal(joined.status, 200, JSON.stringify(joined.body));
    assert.deepEqual((joined.body as any).group.participants.at(-1), {
      phone: dora,
      lid: lid(dora).split('@')[0],
      role: 'member',
    });
  });
});
