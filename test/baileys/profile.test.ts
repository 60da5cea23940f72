/**
 * The live engine's account settings over a Baileys socket (src/engines/baileys/profile.ts,
 * docs/decisions/0039-profile-privacy-blocklist.md): the platform's LID blocklist mapped to phones, privacy changes
 * one Baileys call per setting, the profile changes in order with the push name recorded, the account's own number
 * refused before the platform is asked.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import {
  applyBlock,
  applyPrivacy,
  applyProfile,
  readBlocklist,
  readPrivacy,
} from '../../src/engines/baileys/profile.ts';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';

describe('live engine: profile, privacy and blocklist calls', () => {
  it('readBlocklist: LIDs mapped to phones, phone JIDs kept, unmappable entries left out, ascending', async () => {
    const sock = {
      fetchBlocklist: async () => ['111@lid', '5511988887777@s.whatsapp.net', '222@lid', undefined],
      signalRepository: {
        lidMapping: {
          getPNForLID: async (lid: string) => (lid === '111@lid' ? '5511977776666:0@s.whatsapp.net' : null),
          getLIDForPN: async () => null,
        },
      },
    } as unknown as SocketLike;
    assert.deepEqual(await readBlocklist(sock), ['5511977776666', '5511988887777']);
  });

  it('privacy: read from the platform categories; each given setting changed with its own call', async () => {
    const calls: [string, string][] = [];
    const record = (name: string) => async (value: string) => {
      calls.push([name, value]);
    };
    const sock = {
      fetchPrivacySettings: async (force: boolean) => {
        assert.equal(force, true);
        return { last: 'contacts', online: 'match_last_seen', status: 'none', readreceipts: 'bogus' };
      },
      updateLastSeenPrivacy: record('last'),
      updateOnlinePrivacy: record('online'),
      updateProfilePicturePrivacy: record('profile'),
      updateStatusPrivacy: record('status'),
      updateGroupsAddPrivacy: record('groupadd'),
      updateReadReceiptsPrivacy: record('readreceipts'),
    } as unknown as SocketLike;
    assert.deepEqual(await readPrivacy(sock), {
      lastSeen: 'contacts',
      online: 'match_last_seen',
      profilePicture: 'all',
      about: 'none',
      groupAdd: 'all',
      readReceipts: 'all',
    });
    await applyPrivacy(sock, { readReceipts: 'none', lastSeen: 'none', groupAdd: 'contacts' });
    assert.deepEqual(calls, [
      ['last', 'none'],
      ['groupadd', 'contacts'],
      ['readreceipts', 'none'],
    ]);
  });

  it('profile: name (then recorded), about, picture, in that order; only what is given', async () => {
    const calls: unknown[] = [];
    const sock = {
      updateProfileName: async (name: string) => calls.push(['name', name]),
      updateProfileStatus: async (about: string) => calls.push(['about', about]),
      updateProfilePicture: async (jid: string, data: Buffer) => calls.push(['picture', jid, data.length]),
    } as unknown as SocketLike;
    const me = { phone: '5511999990001', name: 'Shop' };
    const rename = async (name: string) => {
      calls.push(['rename', name]);
    };
    const picture = { data: Buffer.alloc(10), mimetype: 'image/png' };
    await applyProfile(sock, me, { name: 'Acme', about: '', picture }, rename);
    assert.deepEqual(calls, [
      ['name', 'Acme'],
      ['rename', 'Acme'],
      ['about', ''],
      ['picture', '5511999990001@s.whatsapp.net', 10],
    ]);
    calls.length = 0;
    await applyProfile(sock, me, { about: 'Open' }, rename);
    assert.deepEqual(calls, [['about', 'Open']]);
  });

  it("block: the account's own number is refused before the platform is asked", async () => {
    const sock = {} as SocketLike;
    await assert.rejects(
      applyBlock(sock, { phone: '5511999990001', name: '' }, '5511999990001', 'block'),
      (error: unknown) =>
        error instanceof DomainError &&
        error.code === 'invalid' &&
        error.message === 'phone must be another user than this instance',
    );
  });
});
