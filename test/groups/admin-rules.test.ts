/**
 * The pure parts of group administration: the platform's per-participant codes as statuses, invite links and
 * codes, the limits of a change, who may make it, and the platform's `w:gp2` notifications read by the live
 * engine (src/engines/baileys/group-events.ts) into GroupUpdate events with phone JIDs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BinaryNode } from 'baileys';
import {
  adminNeededFor,
  checkGroupChange,
  inviteCodeOf,
  participantStatus,
} from '../../src/domain/groups.ts';
import { groupUpdatesFromNotification } from '../../src/engines/baileys/group-events.ts';
import { JidResolver } from '../../src/engines/baileys/jid.ts';

describe('group administration rules', () => {
  it('maps the platform codes per action', () => {
    const table: [Parameters<typeof participantStatus>[0], number, string][] = [
      ['add', 200, 'added'],
      ['remove', 200, 'removed'],
      ['promote', 200, 'promoted'],
      ['demote', 200, 'demoted'],
      ['add', 403, 'invite-required'],
      ['add', 404, 'not-registered'],
      ['remove', 404, 'not-in-group'],
      ['promote', 404, 'not-in-group'],
      ['add', 408, 'recently-left'],
      ['add', 409, 'already-in-group'],
      ['remove', 406, 'not-allowed'],
      ['demote', 406, 'not-allowed'],
      ['add', 500, 'group-full'],
      ['remove', 403, 'refused'],
      ['add', 0, 'refused'],
    ];
    for (const [action, code, status] of table)
      assert.equal(participantStatus(action, code), status, `${action} ${code}`);
  });

  it('reads invite links and bare codes, and nothing else', () => {
    assert.equal(inviteCodeOf('https://chat.whatsapp.com/AbCdEfGhIjK1234567890'), 'AbCdEfGhIjK1234567890');
    assert.equal(inviteCodeOf(' https://chat.whatsapp.com/AbCdEfGhIjK1234567890/ '), 'AbCdEfGhIjK1234567890');
    assert.equal(inviteCodeOf('AbCdEfGhIjK1234567890'), 'AbCdEfGhIjK1234567890');
    for (const bad of [
      '',
      'https://chat.whatsapp.com/',
      'http://chat.whatsapp.com/AbCdEfGhIjK1234567890',
      'not a code',
      'Ab-Cd',
    ]) {
      assert.equal(inviteCodeOf(bad), null, bad);
    }
  });

  it('checks the limits of a change, naming the field', () => {
    assert.throws(() => checkGroupChange({ name: 'x'.repeat(26) }), /name must be at most 25 characters/);
    assert.throws(
      () => checkGroupChange({ topic: 'x'.repeat(2049) }),
      /topic must be at most 2048 characters/,
    );
    assert.throws(
      () => checkGroupChange({ disappearingTimer: 60 }),
      /disappearingTimer must be one of 0, 86400, 604800, 7776000 \(seconds\)/,
    );
    checkGroupChange({ name: 'x'.repeat(25), topic: '', disappearingTimer: 7_776_000 });
  });

  it('says when a plain member needs to be an admin', () => {
    assert.equal(adminNeededFor({ name: 'N' }, false, 'you'), null);
    assert.equal(
      adminNeededFor({ announce: true }, false, 'you'),
      'you must be a group admin to change the group settings',
    );
    assert.equal(
      adminNeededFor({ topic: 'T' }, true, 'phone 5511988887777'),
      'phone 5511988887777 must be a group admin to edit the info of this group: only admins may edit it',
    );
  });
});

describe('w:gp2 notifications as GroupUpdate events (live engine)', () => {
  const resolver = new JidResolver();
  resolver.remember('111@lid', '5511988887777@s.whatsapp.net');
  const ctx = { resolver, me: () => ({ phoneJid: '5511999990001@s.whatsapp.net', lid: null, pushName: '' }) };
  const group = '120363025246125486@g.us';
  const notification = (content: BinaryNode[], attrs: Record<string, string> = {}): BinaryNode => ({
    tag: 'notification',
    attrs: {
      from: group,
      type: 'w:gp2',
      t: '1767268800',
      participant: '222@lid',
      participant_pn: '5511977776666@s.whatsapp.net',
      ...attrs,
    },
    content,
  });
  const p = (jid: string, phone?: string): BinaryNode => ({
    tag: 'participant',
    attrs: phone ? { jid, phone_number: phone } : { jid },
  });
  const at = '2026-01-01T12:00:00.000Z';
  const base = {
    groupJid: group,
    actor: '5511977776666@s.whatsapp.net',
    participants: [],
    timestamp: Date.parse(at),
  };

  it('participants: LIDs resolved by phone_number or the mapping; self add and remove are join and leave', async () => {
    const updates = await groupUpdatesFromNotification(
      notification([
        { tag: 'add', attrs: {}, content: [p('333@lid', '5511966665555@s.whatsapp.net'), p('111@lid')] },
        { tag: 'promote', attrs: {}, content: [p('111@lid')] },
        { tag: 'remove', attrs: {}, content: [p('222@lid', '5511977776666@s.whatsapp.net')] },
      ]),
      ctx,
      0,
    );
    assert.deepEqual(updates, [
      {
        ...base,
        action: 'add',
        participants: ['5511966665555@s.whatsapp.net', '5511988887777@s.whatsapp.net'],
      },
      { ...base, action: 'promote', participants: ['5511988887777@s.whatsapp.net'] },
      { ...base, action: 'leave', participants: ['5511977776666@s.whatsapp.net'] },
    ]);
    const joined = await groupUpdatesFromNotification(
      notification([
        { tag: 'add', attrs: { reason: 'invite' }, content: [p('222@lid', '5511977776666@s.whatsapp.net')] },
      ]),
      ctx,
      0,
    );
    assert.equal(joined[0]?.action, 'join');
  });

  it('settings: subject, description (set and deleted), announce, locked, ephemeral', async () => {
    const updates = await groupUpdatesFromNotification(
      notification([
        { tag: 'subject', attrs: { subject: 'Team 2026' } },
        {
          tag: 'description',
          attrs: { id: 'D1' },
          content: [{ tag: 'body', attrs: {}, content: Buffer.from('Orders') }],
        },
        { tag: 'description', attrs: { id: 'D2', delete: 'true' } },
        { tag: 'not_announcement', attrs: {} },
        { tag: 'locked', attrs: {} },
        { tag: 'ephemeral', attrs: { expiration: '604800' } },
        { tag: 'not_ephemeral', attrs: {} },
        { tag: 'picture', attrs: {} },
      ]),
      ctx,
      0,
    );
    assert.deepEqual(updates, [
      { ...base, action: 'subject', name: 'Team 2026' },
      { ...base, action: 'description', topic: 'Orders' },
      { ...base, action: 'description', topic: '' },
      { ...base, action: 'announce', isAnnounce: false },
      { ...base, action: 'locked', isLocked: true },
      { ...base, action: 'ephemeral', disappearingTimer: 604800 },
      { ...base, action: 'ephemeral', disappearingTimer: 0 },
    ]);
  });

  it('ignores notifications that are not about a group; no actor is null', async () => {
    assert.deepEqual(
      await groupUpdatesFromNotification(notification([], { from: '5511977776666@s.whatsapp.net' }), ctx, 0),
      [],
    );
    const { participant: _p, participant_pn: _pn, ...attrs } = notification([]).attrs;
    const anonymous = await groupUpdatesFromNotification(
      { tag: 'notification', attrs: { ...attrs, t: '' }, content: [{ tag: 'locked', attrs: {} }] },
      ctx,
      5_000,
    );
    assert.deepEqual(anonymous, [
      { ...base, actor: null, timestamp: 5_000, action: 'locked', isLocked: true },
    ]);
  });
});
