import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { relayAddress } from '../../src/engines/baileys/addressing.ts';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';

/** A socket whose LID mapping answers from `lids` (phone JID → LID JID), recording what it was asked. */
function socketWith(lids: Record<string, string>, fail?: Error) {
  const asked: string[] = [];
  const sock = {
    signalRepository: {
      lidMapping: {
        getPNForLID: async () => null,
        getLIDForPN: async (pn: string) => {
          asked.push(pn);
          if (fail) throw fail;
          return lids[pn] ?? null;
        },
      },
    },
  } as unknown as SocketLike;
  return { sock, asked };
}

describe('relayAddress: 1:1 sends go to the LID Baileys knows for the phone', () => {
  it('a phone JID with a known LID becomes the plain LID (device part dropped)', async () => {
    const { sock, asked } = socketWith({ '5511988887777@s.whatsapp.net': '201234567890123:0@lid' });
    assert.equal(await relayAddress(sock, '5511988887777@s.whatsapp.net'), '201234567890123@lid');
    assert.deepEqual(asked, ['5511988887777@s.whatsapp.net']);
  });

  it('a phone JID with no LID stays as it is', async () => {
    const { sock } = socketWith({});
    assert.equal(await relayAddress(sock, '5511988887777@s.whatsapp.net'), '5511988887777@s.whatsapp.net');
  });

  it('groups and LIDs are relayed as they are, without a lookup', async () => {
    const { sock, asked } = socketWith({});
    assert.equal(await relayAddress(sock, '120363000000000001@g.us'), '120363000000000001@g.us');
    assert.equal(await relayAddress(sock, '201234567890123@lid'), '201234567890123@lid');
    assert.deepEqual(asked, []);
  });

  it('a failing lookup is reported and the phone JID used', async () => {
    const failure = new Error('usync timed out');
    const { sock } = socketWith({}, failure);
    const reported: unknown[] = [];
    assert.equal(
      await relayAddress(sock, '5511988887777@s.whatsapp.net', (error) => reported.push(error)),
      '5511988887777@s.whatsapp.net',
    );
    assert.deepEqual(reported, [failure]);
  });
});
