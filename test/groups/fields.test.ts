import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GroupInfo } from '../../src/domain/messages.ts';
import { toGroupCreated, toGroupDetails, toGroupListed } from '../../src/http/routes/v1/groups.ts';

const group: GroupInfo = {
  jid: '120363000000000001@g.us',
  name: 'Team',
  topic: 'About us',
  ownerJid: '5511999990001@s.whatsapp.net',
  created: Date.parse('2025-01-15T12:00:00.000Z'),
  nameSetAt: Date.parse('2025-02-01T08:30:00.000Z'),
  nameSetBy: '5511999990002@s.whatsapp.net',
  isAnnounce: true,
  isLocked: true,
  isEphemeral: true,
  disappearingTimer: 604_800,
  participants: [{ jid: '5511999990001@s.whatsapp.net', isAdmin: true, isSuperAdmin: true }],
};

describe('group field sets (docs/api.md#groups: fields per operation)', () => {
  it('maps engine groups to the info, list and create fields with RFC 3339 times', () => {
    const info = toGroupDetails(group);
    assert.deepEqual(info, {
      jid: group.jid,
      name: 'Team',
      topic: 'About us',
      ownerJid: group.ownerJid,
      groupCreated: '2025-01-15T12:00:00.000Z',
      nameSetAt: '2025-02-01T08:30:00.000Z',
      nameSetBy: '5511999990002@s.whatsapp.net',
      isAnnounce: true,
      isLocked: true,
      isEphemeral: true,
      disappearingTimer: 604_800,
      participants: group.participants,
    });
    const { topic: _t, nameSetAt: _a, nameSetBy: _b, ...listed } = info;
    assert.deepEqual(toGroupListed(group), listed);
    assert.deepEqual(toGroupCreated(group), {
      jid: info.jid,
      name: info.name,
      ownerJid: info.ownerJid,
      groupCreated: info.groupCreated,
      participants: info.participants,
    });
  });

  it('a name never changed dates from the creation by the owner', () => {
    const info = toGroupDetails({ ...group, nameSetAt: 0, nameSetBy: '' });
    assert.equal(info.nameSetAt, '2025-01-15T12:00:00.000Z');
    assert.equal(info.nameSetBy, group.ownerJid);
  });
});
