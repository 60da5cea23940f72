/**
 * The live engine's chat actions over a Baileys socket (src/engines/baileys/chat-actions.ts,
 * docs/decisions/0043-chat-actions-and-star.md): each action as the `chatModify` modification Baileys turns into an
 * app state patch, the chat's latest stored message cited with its timestamp in seconds, and the patch Baileys
 * builds from it (Utils/chat-utils.js `chatModificationToAppPatch`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ChatModification, chatModificationToAppPatch } from 'baileys';
import { applyChatAction, chatModification, starMessage } from '../../src/engines/baileys/chat-actions.ts';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';

const ANA = '5511988887777@s.whatsapp.net';
const GROUP = '120363025246125486@g.us';
const LAST = [{ id: 'ABC', fromMe: false, timestamp: 1_700_000_000_123 }];
const lastMessages = [{ key: { remoteJid: ANA, id: 'ABC', fromMe: false }, messageTimestamp: 1_700_000_000 }];

describe('live engine: chat actions as chatModify', () => {
  it('each action as its modification', () => {
    assert.deepEqual(chatModification(ANA, { action: 'archive' }, LAST), { archive: true, lastMessages });
    assert.deepEqual(chatModification(ANA, { action: 'unarchive' }, LAST), { archive: false, lastMessages });
    assert.deepEqual(chatModification(ANA, { action: 'pin' }, LAST), { pin: true });
    assert.deepEqual(chatModification(ANA, { action: 'unpin' }, LAST), { pin: false });
    assert.deepEqual(chatModification(ANA, { action: 'mute', until: 1_900_000_000_000 }, LAST), {
      mute: 1_900_000_000_000,
    });
    assert.deepEqual(chatModification(ANA, { action: 'mute', until: null }, LAST), { mute: -1 });
    assert.deepEqual(chatModification(ANA, { action: 'unmute' }, LAST), { mute: null });
    assert.deepEqual(chatModification(ANA, { action: 'mark-unread' }, []), {
      markRead: false,
      lastMessages: [],
    });
    const group = chatModification(GROUP, { action: 'archive' }, [
      { id: 'G1', fromMe: false, timestamp: 1_700_000_000_123, participant: ANA },
    ]);
    assert.deepEqual(group, {
      archive: true,
      lastMessages: [
        {
          key: { remoteJid: GROUP, id: 'G1', fromMe: false, participant: ANA },
          messageTimestamp: 1_700_000_000,
        },
      ],
    });
  });

  it('Baileys accepts each modification as an app state patch', () => {
    const patches = [
      chatModification(ANA, { action: 'archive' }, LAST),
      chatModification(ANA, { action: 'pin' }, LAST),
      chatModification(ANA, { action: 'mute', until: null }, LAST),
      chatModification(ANA, { action: 'mark-unread' }, []),
    ].map((mod) => chatModificationToAppPatch(mod, ANA));
    assert.deepEqual(
      patches.map((p) => p.index),
      [
        ['archive', ANA],
        ['pin_v1', ANA],
        ['mute', ANA],
        ['markChatAsRead', ANA],
      ],
    );
    assert.equal(patches[2]?.syncAction.muteAction?.muteEndTimestamp, -1);
  });

  it('applyChatAction and starMessage call chatModify with the chat', async () => {
    const calls: { mod: ChatModification; jid: string }[] = [];
    const sock = {
      chatModify: async (mod: ChatModification, jid: string) => {
        calls.push({ mod, jid });
      },
    } as unknown as SocketLike;
    await applyChatAction(sock, ANA, { action: 'pin' }, []);
    await starMessage(sock, ANA, { id: 'ABC', fromMe: true }, true);
    await starMessage(sock, ANA, { id: 'ABC', fromMe: true }, false);
    assert.deepEqual(calls, [
      { mod: { pin: true }, jid: ANA },
      { mod: { star: { messages: [{ id: 'ABC', fromMe: true }], star: true } }, jid: ANA },
      { mod: { star: { messages: [{ id: 'ABC', fromMe: true }], star: false } }, jid: ANA },
    ]);
  });
});
