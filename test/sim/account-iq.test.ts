/**
 * The simulator's answers to the account-settings iqs Baileys 7 sends (sim/server/account-iq.ts,
 * docs/decisions/0039-profile-privacy-blocklist.md): privacy get/set with each category's values checked, blocklist
 * get/set by LID or phone JID, the about text, the account's own picture, and an app state patch carrying a new push
 * name, encrypted as Baileys encrypts it (encodeSyncdPatch) with the key the phone shared.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { type BinaryNode, encodeSyncdPatch, newLTHashState, proto } from 'baileys';
import { appStateKeyShareMessage } from '../../sim/messaging/history.ts';
import { Accounts, type SimChatState } from '../../sim/model/accounts.ts';
import {
  applyChatMutation,
  blocklistIq,
  ownPictureIq,
  privacyIq,
  statusIq,
} from '../../sim/server/account-iq.ts';
import { appStatePatchIq } from '../../sim/server/app-state.ts';

const iq = (xmlns: string, type: 'get' | 'set', content?: unknown[], attrs: Record<string, string> = {}) =>
  ({ tag: 'iq', attrs: { xmlns, type, to: 's.whatsapp.net', id: '1', ...attrs }, content }) as never;

describe('simulator: the account-settings iqs', () => {
  const accounts = new Accounts();
  const shop = accounts.create({ phone: '5531999990031', pushName: 'Shop' });
  const ana = accounts.create({ phone: '5531988887731' });
  const ghost = accounts.create({ phone: '5531977777731', registered: false });

  it('privacy: defaults, a set per category, values checked per category', () => {
    const read = () => {
      const answer = privacyIq(iq('privacy', 'get', [{ tag: 'privacy', attrs: {} }]), shop);
      assert.ok('content' in answer && answer.content);
      const [node] = answer.content;
      return Object.fromEntries(
        ((node?.content ?? []) as BinaryNode[]).map((c) => [c.attrs.name, c.attrs.value]),
      );
    };
    assert.equal(read().status, 'contacts');
    const set = (name: string, value: string) =>
      privacyIq(
        iq('privacy', 'set', [
          { tag: 'privacy', attrs: {}, content: [{ tag: 'category', attrs: { name, value } }] },
        ]),
        shop,
      );
    assert.deepEqual(set('online', 'match_last_seen'), {});
    assert.deepEqual(set('readreceipts', 'none'), {});
    assert.deepEqual(set('online', 'contacts'), { error: { code: 400, text: 'bad-request' } });
    assert.deepEqual(set('nonsense', 'all'), { error: { code: 400, text: 'bad-request' } });
    assert.equal(read().online, 'match_last_seen');
    assert.equal(read().readreceipts, 'none');
  });

  it('blocklist: block by LID with the phone beside it, by phone; unblock; the list names LIDs', () => {
    const set = (action: string, attrs: Record<string, string>) =>
      blocklistIq(iq('blocklist', 'set', [{ tag: 'item', attrs: { action, ...attrs } }]), shop, accounts);
    assert.deepEqual(set('block', { jid: `${ana.lid}@lid`, pn_jid: `${ana.phone}@s.whatsapp.net` }), {});
    assert.deepEqual(set('block', { jid: `${ana.lid}@lid` }), {});
    assert.deepEqual(shop.blocked, [ana.phone]);
    const list = blocklistIq(iq('blocklist', 'get'), shop, accounts);
    assert.deepEqual(list, {
      content: [{ tag: 'list', attrs: {}, content: [{ tag: 'item', attrs: { jid: `${ana.lid}@lid` } }] }],
    });
    assert.deepEqual(set('unblock', { jid: `${ana.phone}@s.whatsapp.net` }), {});
    assert.deepEqual(shop.blocked, []);
    assert.deepEqual(set('block', { jid: `${ghost.phone}@s.whatsapp.net` }), {
      error: { code: 404, text: 'item-not-found' },
    });
    assert.deepEqual(set('mute', { jid: `${ana.lid}@lid` }), { error: { code: 400, text: 'bad-request' } });
  });

  it('status and the own picture: stored; a picture set without a <picture> removes it', () => {
    assert.deepEqual(
      statusIq(iq('status', 'set', [{ tag: 'status', attrs: {}, content: Buffer.from('Open 9–18') }]), shop),
      {},
    );
    assert.equal(shop.about, 'Open 9–18');
    const jpeg = randomBytes(64);
    const set = ownPictureIq(
      iq('w:profile:picture', 'set', [{ tag: 'picture', attrs: { type: 'image' }, content: jpeg }]),
      shop,
    );
    assert.ok('content' in set);
    assert.deepEqual(shop.picture, jpeg);
    assert.match(shop.avatar?.url ?? '', /^https:\/\/pps\.sim\.example\/v\/t61\/[0-9]+\.jpg\?id=[0-9]+$/);
    assert.deepEqual(
      ownPictureIq(iq('w:profile:picture', 'set', undefined, { target: '120363025246125486@g.us' }), shop),
      { error: { code: 501, text: 'feature-not-implemented' } },
    );
    assert.deepEqual(ownPictureIq(iq('w:profile:picture', 'set'), shop), {});
    assert.equal(shop.picture, undefined);
    assert.equal(shop.avatar, undefined);
  });

  it('app state: a setting_pushName patch encrypted with the shared key renames the account', async () => {
    const share = appStateKeyShareMessage(shop).protocolMessage?.appStateSyncKeyShare?.keys?.[0];
    assert.ok(share?.keyId?.keyId && share.keyData);
    const keyId = Buffer.from(share.keyId.keyId).toString('base64');
    const keyData = proto.Message.AppStateSyncKeyData.fromObject(share.keyData);
    const { patch } = await encodeSyncdPatch(
      {
        type: 'critical_block',
        index: ['setting_pushName'],
        syncAction: { pushNameSetting: { name: 'Acme Store' } },
        apiVersion: 1,
        operation: proto.SyncdMutation.SyncdOperation.SET,
      },
      keyId,
      newLTHashState(),
      async (id: string) => (id === keyId ? keyData : null),
    );
    const content = proto.SyncdPatch.encode(patch).finish();
    const answer = await appStatePatchIq(
      iq('w:sync:app:state', 'set', [
        {
          tag: 'sync',
          attrs: {},
          content: [
            {
              tag: 'collection',
              attrs: { name: 'critical_block', version: '0', return_snapshot: 'false' },
              content: [{ tag: 'patch', attrs: {}, content }],
            },
          ],
        },
      ]),
      shop,
    );
    assert.ok('content' in answer);
    assert.equal(shop.pushName, 'Acme Store');
    const stranger = accounts.create({ phone: '5531966667731' });
    const refused = await appStatePatchIq(
      iq('w:sync:app:state', 'set', [
        {
          tag: 'sync',
          attrs: {},
          content: [
            {
              tag: 'collection',
              attrs: { name: 'critical_block', version: '0' },
              content: [{ tag: 'patch', attrs: {}, content }],
            },
          ],
        },
      ]),
      stranger,
    );
    assert.deepEqual(refused, { error: { code: 400, text: 'no app state key' } });
  });
});

describe('simulator: chat state from app state mutations (docs/decisions/0043-chat-actions-and-star.md)', () => {
  it('archive, pin_v1, mute, markChatAsRead and star change the account chat state; others are ignored', () => {
    const accounts = new Accounts();
    const shop = accounts.create({ phone: '5531999990043', pushName: 'Shop' });
    const chat = '5531988887743@s.whatsapp.net';
    const blank: SimChatState = { archived: false, pinned: false, mutedUntil: null, markedUnread: false };
    applyChatMutation(shop, ['pin_v1', chat], { pinAction: { pinned: true } });
    assert.deepEqual(shop.chats?.[chat], { ...blank, pinned: true });
    // Archiving unpins, as the phones do.
    applyChatMutation(shop, ['archive', chat], { archiveChatAction: { archived: true } });
    assert.deepEqual(shop.chats?.[chat], { ...blank, archived: true });
    applyChatMutation(shop, ['archive', chat], { archiveChatAction: { archived: false } });
    applyChatMutation(shop, ['mute', chat], {
      muteAction: { muted: true, muteEndTimestamp: 1_900_000_000_000 },
    });
    applyChatMutation(shop, ['markChatAsRead', chat], { markChatAsReadAction: { read: false } });
    assert.deepEqual(shop.chats?.[chat], { ...blank, mutedUntil: 1_900_000_000_000, markedUnread: true });
    applyChatMutation(shop, ['mute', chat], { muteAction: { muted: true, muteEndTimestamp: -1 } });
    assert.equal(shop.chats?.[chat]?.mutedUntil, -1);
    applyChatMutation(shop, ['mute', chat], { muteAction: { muted: false } });
    applyChatMutation(shop, ['markChatAsRead', chat], { markChatAsReadAction: { read: true } });
    assert.deepEqual(shop.chats?.[chat], blank);
    applyChatMutation(shop, ['star', chat, 'ABC', '1', '0'], { starAction: { starred: true } });
    applyChatMutation(shop, ['star', chat, 'DEF', '0', '0'], { starAction: { starred: true } });
    applyChatMutation(shop, ['star', chat, 'ABC', '1', '0'], { starAction: { starred: true } });
    assert.deepEqual(shop.starred, [
      { chat, id: 'DEF', fromMe: false },
      { chat, id: 'ABC', fromMe: true },
    ]);
    applyChatMutation(shop, ['star', chat, 'DEF', '0', '0'], { starAction: { starred: false } });
    assert.deepEqual(shop.starred, [{ chat, id: 'ABC', fromMe: true }]);
    applyChatMutation(shop, ['clearChat', chat, '1', '0'], {});
    assert.deepEqual(Object.keys(shop.chats ?? {}), [chat]);
  });
});
