/**
 * The simulator's app state (sim/server/app-state.ts, sim/model/labels.ts, docs/decisions/0045-business-labels.md):
 * a device's `label_edit` / `label_jid` patch, encrypted as Baileys encrypts it (`encodeSyncdPatch` of
 * `chatModificationToAppPatch`) with the key the phone shared, changes the account's labels and is kept at the next
 * version; a patch on a stale version is refused 409; a resync gets the kept patches after its version, which
 * Baileys' own `decodePatches` reads back with every MAC checked; the phone's own mutation is one more such patch and
 * a `server_sync` notification for each companion; the `w:biz` business profile answers business accounts only.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type BinaryNode,
  type ChatModification,
  chatModificationToAppPatch,
  decodePatches,
  encodeSyncdPatch,
  extractSyncdPatches,
  type LTHashState,
  newLTHashState,
  proto,
} from 'baileys';
import { appStateKeyShareMessage } from '../../sim/messaging/history.ts';
import { Accounts, phoneJid } from '../../sim/model/accounts.ts';
import { applyLabelMutation, labelsView } from '../../sim/model/labels.ts';
import { decodeState, encodeState, restoreUsers, snapshot } from '../../sim/model/state.ts';
import { generateKeyPair } from '../../sim/noise/certificates.ts';
import { appStatePatchIq, phoneMutation } from '../../sim/server/app-state.ts';
import { businessProfileAnswer } from '../../sim/server/business.ts';

const ANA = '5531988887745@s.whatsapp.net';

const sync = (collection: BinaryNode) =>
  ({
    tag: 'iq',
    attrs: { xmlns: 'w:sync:app:state', type: 'set', to: 's.whatsapp.net', id: '1' },
    content: [{ tag: 'sync', attrs: {}, content: [collection] }],
  }) as BinaryNode;

describe('simulator: app state patches and business labels', () => {
  const accounts = new Accounts();
  const shop = accounts.create({ phone: '5531999990045', verifiedName: 'Acme Shop' });
  const solo = accounts.create({ phone: '5531999990046' });
  const share = appStateKeyShareMessage(shop).protocolMessage?.appStateSyncKeyShare?.keys?.[0];
  assert.ok(share?.keyId?.keyId && share.keyData);
  const keyId = Buffer.from(share.keyId.keyId).toString('base64');
  const keyData = proto.Message.AppStateSyncKeyData.fromObject(share.keyData);
  const getKey = async (id: string) => (id === keyId ? keyData : null);
  /** What the device holds of the regular collection (as Baileys keeps `app-state-sync-version`). */
  let device: LTHashState = newLTHashState();

  /** The device sends `mod` as Baileys' appPatch does, from its current state. */
  const send = async (mod: ChatModification, jid: string, version = device.version) => {
    const { patch, state } = await encodeSyncdPatch(
      chatModificationToAppPatch(mod, jid),
      keyId,
      { ...device, version },
      getKey,
    );
    const answer = await appStatePatchIq(
      sync({
        tag: 'collection',
        attrs: { name: 'regular', version: String(state.version - 1), return_snapshot: 'false' },
        content: [{ tag: 'patch', attrs: {}, content: proto.SyncdPatch.encode(patch).finish() }],
      }),
      shop,
    );
    if (!('error' in answer)) device = state;
    return answer;
  };

  /**
   * The device resyncs from `account` (the shop's as held now, or as restored): Baileys reads the answer and decodes
   * its patches with every MAC checked.
   */
  const resync = async (account = shop) => {
    const answer = await appStatePatchIq(
      sync({ tag: 'collection', attrs: { name: 'regular', version: String(device.version) } }),
      account,
    );
    assert.ok('content' in answer && answer.content);
    const { regular } = await extractSyncdPatches({ tag: 'iq', attrs: {}, content: answer.content }, {});
    assert.ok(regular);
    const { state, mutationMap } = await decodePatches(
      'regular',
      regular.patches,
      device,
      getKey,
      {},
      device.version,
      undefined,
      true,
    );
    device = state;
    return Object.values(mutationMap).map((m) => ({ index: m.index, value: m.syncAction.value }));
  };

  it("a device's label_edit and label_jid patches change the labels; a stale version is refused 409", async () => {
    assert.deepEqual(
      await send({ addLabel: { id: '1', name: 'New customer', color: 1 } }, phoneJid(shop.phone)),
      {
        content: [
          {
            tag: 'sync',
            attrs: {},
            content: [{ tag: 'collection', attrs: { name: 'regular', version: '1' } }],
          },
        ],
      },
    );
    await send({ addChatLabel: { labelId: '1' } }, ANA);
    assert.deepEqual(labelsView(shop), {
      labels: [{ id: '1', name: 'New customer', color: 1, predefinedId: null }],
      chats: { [ANA]: ['1'] },
    });
    assert.equal(shop.appState?.regular?.version, 2);
    assert.deepEqual(await send({ removeChatLabel: { labelId: '1' } }, ANA, 0), {
      error: { code: 409, text: 'conflict' },
    });
    assert.deepEqual(labelsView(shop).chats, { [ANA]: ['1'] }, 'the refused patch changed nothing');
    assert.deepEqual(await resync(), [], 'a device up to date gets no patch');
  });

  it("the phone's own mutation: a kept patch a resync decodes with its MACs, and server_sync for the companion", async () => {
    const companion = accounts.linkCompanion(shop, { noiseKey: Buffer.alloc(32), keys: shop.handset.keys });
    const made = await phoneMutation(
      shop,
      chatModificationToAppPatch({ addLabel: { id: '2', name: 'Paid', color: 5 } }, phoneJid(shop.phone)),
    );
    assert.deepEqual(made, { version: 3, devices: 1 });
    await phoneMutation(shop, chatModificationToAppPatch({ addChatLabel: { labelId: '2' } }, ANA));
    const [notification] = companion.offline;
    assert.equal(notification?.tag, 'notification');
    assert.equal(notification?.attrs.type, 'server_sync');
    assert.deepEqual(notification?.content, [
      { tag: 'collection', attrs: { name: 'regular', version: '3' } },
    ]);
    const mutations = await resync();
    assert.deepEqual(
      mutations.map((m) => m.index),
      [
        ['label_edit', '2'],
        ['label_jid', '2', ANA],
      ],
    );
    assert.equal(mutations[0]?.value?.labelEditAction?.name, 'Paid');
    assert.equal(device.version, 4);
    assert.deepEqual(labelsView(shop).chats, { [ANA]: ['1', '2'] });
    // A new device resyncing from 0 gets every patch, the other devices' ones included.
    const caughtUp = device;
    device = newLTHashState();
    assert.equal((await resync()).length, 4);
    device = caughtUp;
  });

  it('the state file keeps the app state: after a restart the phone patches on and a resync still checks out', async () => {
    const restored = new Accounts();
    restoreUsers(
      decodeState(encodeState(snapshot(generateKeyPair(), accounts)), 'state.json'),
      restored,
      'state.json',
    );
    const again = restored.get(shop.phone);
    assert.ok(again);
    assert.deepEqual(labelsView(again), labelsView(shop));
    await phoneMutation(again, chatModificationToAppPatch({ removeChatLabel: { labelId: '1' } }, ANA));
    const mutations = await resync(again);
    assert.equal(device.version, 5);
    assert.deepEqual(
      mutations.map((m) => m.index),
      [['label_jid', '1', ANA]],
    );
    assert.deepEqual(labelsView(again).chats, { [ANA]: ['2'] });
  });

  it('a deleted label comes off every chat; a personal account has no business profile', async () => {
    applyLabelMutation(shop, ['label_edit', '1'], {
      labelEditAction: { name: 'New customer', deleted: true },
    });
    assert.deepEqual(labelsView(shop), {
      labels: [{ id: '2', name: 'Paid', color: 5, predefinedId: null }],
      chats: { [ANA]: ['2'] },
    });
    const ask = (jid: string) =>
      businessProfileAnswer(
        {
          tag: 'iq',
          attrs: { xmlns: 'w:biz', type: 'get' },
          content: [
            { tag: 'business_profile', attrs: { v: '244' }, content: [{ tag: 'profile', attrs: { jid } }] },
          ],
        },
        accounts,
      );
    assert.deepEqual(ask(phoneJid(shop.phone)), [
      {
        tag: 'business_profile',
        attrs: { v: '244' },
        content: [
          {
            tag: 'profile',
            attrs: { jid: phoneJid(shop.phone) },
            content: [{ tag: 'description', attrs: {}, content: Buffer.from('') }],
          },
        ],
      },
    ]);
    assert.deepEqual(ask(phoneJid(solo.phone)), [
      { tag: 'business_profile', attrs: { v: '244' }, content: [] },
    ]);
    await assert.rejects(
      phoneMutation(
        solo,
        chatModificationToAppPatch({ addLabel: { id: '1', name: 'X' } }, phoneJid(solo.phone)),
      ),
      /has no app state key yet/,
    );
  });
});
