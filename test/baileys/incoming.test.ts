import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  areJidsSameUser,
  type BinaryNode,
  getStatusFromReceiptType,
  isJidGroup,
  isJidStatusBroadcast,
  jidNormalizedUser,
  type MessageUserReceiptUpdate,
  proto,
  type WAMessageUpdate,
} from 'baileys';
import {
  type MappingContext,
  presenceFromChatstate,
  receiptsFromGroupUpdates,
  receiptsFromUpdates,
  toEngineMessage,
} from '../../src/engines/baileys/incoming.ts';
import { ME } from './fake-socket.ts';
import {
  GROUP,
  type MappingFixture,
  ME_PHONE_JID,
  MEMBER,
  MEMBER_LID,
  mappingFixture,
  messageStanza,
  NOW,
  PEER,
  PEER_LID,
  wire,
} from './mapping-fixture.ts';

/**
 * Platform messages, receipts and presence → domain events, on fixtures from Baileys' own encoders and decoders:
 * LID-addressed messages resolved to phone JIDs (from the key's alternate field, `participant_pn` or the LID mapping
 * store), own messages sent from the phone, protocol-only stanzas, receipts and chat states. History, groups and
 * contacts: incoming-sync.test.ts.
 */
describe("platform events → domain events, on fixtures from Baileys' encoders/decoders", () => {
  let fixture: MappingFixture;
  let ctx: MappingContext;
  const decode = (stanza: BinaryNode) => fixture.decode(stanza);
  before(async () => {
    fixture = await mappingFixture();
    ctx = fixture.ctx;
  });
  after(() => fixture.cleanup());

  it('1:1 LID-addressed message: chat and sender are the phone JID from the key alternate field', async () => {
    const msg = await decode(
      messageStanza(
        { from: PEER_LID, sender_pn: PEER, addressing_mode: 'lid', notify: 'Ana' },
        { conversation: 'oi' },
      ),
    );
    assert.equal(msg.key.remoteJid, PEER_LID, 'Baileys keeps the LID as remoteJid');
    assert.equal(msg.key.remoteJidAlt, PEER);
    const mapped = await toEngineMessage(msg, ctx, NOW);
    assert.deepEqual(mapped, {
      id: msg.key.id,
      source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
      pushName: 'Ana',
      timestamp: 1_700_000_000_000,
      content: { kind: 'text', text: 'oi' },
    });
  });

  it('group LID-addressed message: the participant resolves from participant_pn', async () => {
    const msg = await decode(
      messageStanza(
        {
          from: GROUP,
          participant: MEMBER_LID,
          participant_pn: MEMBER,
          addressing_mode: 'lid',
          notify: 'Bia',
        },
        {
          imageMessage: {
            caption: 'pic',
            mimetype: 'image/jpeg',
            fileLength: 1234,
            contextInfo: { stanzaId: '3EB0Q' },
          },
        },
      ),
    );
    const mapped = await toEngineMessage(msg, ctx, NOW);
    assert.deepEqual(mapped?.source, { chat: GROUP, sender: MEMBER, isFromMe: false, isGroup: true });
    assert.deepEqual(mapped?.content, {
      kind: 'image',
      text: 'pic',
      mimetype: 'image/jpeg',
      fileLength: 1234,
      quotedId: '3EB0Q',
    });
  });

  it('LID without alternate field: resolved from the LID mapping store; else passed as is and flagged', async () => {
    const known = await decode(
      messageStanza({ from: '31313131@lid', addressing_mode: 'lid' }, { conversation: 'a' }),
    );
    const mappedKnown = await toEngineMessage(known, ctx, NOW);
    assert.deepEqual(mappedKnown?.source, {
      chat: '5511933332222@s.whatsapp.net',
      sender: '5511933332222@s.whatsapp.net',
      isFromMe: false,
      isGroup: false,
    });
    const unknown = await decode(
      messageStanza({ from: '42424242:3@lid', addressing_mode: 'lid' }, { conversation: 'b' }),
    );
    const mappedUnknown = await toEngineMessage(unknown, ctx, NOW);
    assert.deepEqual(mappedUnknown?.source, {
      chat: '42424242@lid',
      sender: '42424242@lid',
      isFromMe: false,
      isGroup: false,
      lidUnresolved: true,
    });
    const afterAlt = await decode(
      messageStanza({ from: PEER_LID, addressing_mode: 'lid' }, { conversation: 'c' }),
    );
    assert.equal(
      (await toEngineMessage(afterAlt, ctx, NOW))?.source.chat,
      PEER,
      'remembered from an earlier alt',
    );
  });

  it("own message sent from the phone: isFromMe, the account's phone JID as sender, the peer as chat", async () => {
    const msg = await decode(
      messageStanza(
        {
          from: ME.lid.replace(':7', ':0'),
          recipient: PEER_LID,
          peer_recipient_pn: PEER,
          addressing_mode: 'lid',
        },
        { extendedTextMessage: { text: 'from my phone' } },
      ),
    );
    assert.equal(msg.key.fromMe, true);
    const mapped = await toEngineMessage(msg, ctx, NOW);
    assert.deepEqual(mapped?.source, { chat: PEER, sender: ME_PHONE_JID, isFromMe: true, isGroup: false });
    assert.equal(mapped?.pushName, ME.name);
  });

  it('protocol-only stanzas are not messages', async () => {
    const msg = await decode(
      messageStanza(
        { from: PEER, type: 'text' },
        { protocolMessage: { type: proto.Message.ProtocolMessage.Type.REVOKE } },
      ),
    );
    assert.equal(await toEngineMessage(msg, ctx, NOW), null);
  });

  it('receipts: 1:1 (read, delivered, played) and group, LIDs resolved, ids grouped', async () => {
    const receipt = async (attrs: Record<string, string>, more: string[] = []) => {
      const node = await wire({
        tag: 'receipt',
        attrs: { id: '3EB0R1', t: '1700000500', ...attrs },
        content: more.length
          ? [{ tag: 'list', attrs: {}, content: more.map((id) => ({ tag: 'item', attrs: { id } })) }]
          : undefined,
      });
      const ids = [node.attrs.id ?? '', ...more];
      const status = getStatusFromReceiptType(node.attrs.type);
      const from = node.attrs.from ?? '';
      // Baileys' handleReceipt reports group and status receipts per participant (message-receipt.update).
      if (isJidGroup(from) || isJidStatusBroadcast(from)) {
        const key = { remoteJid: from, fromMe: true, participant: node.attrs.participant };
        const field =
          status === proto.WebMessageInfo.Status.DELIVERY_ACK ? 'receiptTimestamp' : 'readTimestamp';
        const updates: MessageUserReceiptUpdate[] = ids.map((id) => ({
          key: { ...key, id },
          receipt: { userJid: jidNormalizedUser(node.attrs.participant), [field]: Number(node.attrs.t) },
        }));
        return receiptsFromGroupUpdates(updates, ctx, NOW);
      }
      // as Baileys' handleReceipt builds the key: our own device's receipts name the chat in `recipient`
      const fromMyDevice = areJidsSameUser(node.attrs.participant ?? from, ME.id);
      const remoteJid = fromMyDevice ? (node.attrs.recipient ?? from) : from;
      const key = { remoteJid, fromMe: !node.attrs.recipient, participant: node.attrs.participant };
      const updates: WAMessageUpdate[] = ids.map((id) => ({
        key: { ...key, id },
        update: { status, messageTimestamp: Number(node.attrs.t) },
      }));
      return receiptsFromUpdates(updates, ctx, NOW);
    };
    const peerSource = { chat: PEER, sender: PEER, isFromMe: false, isGroup: false };
    assert.deepEqual(await receipt({ from: PEER_LID, type: 'read' }, ['3EB0R2']), [
      {
        type: 'receipt',
        state: 'read',
        messageIds: ['3EB0R1', '3EB0R2'],
        source: peerSource,
        timestamp: 1_700_000_500_000,
      },
    ]);
    assert.equal((await receipt({ from: PEER_LID }))[0]?.state, 'delivered');
    assert.equal((await receipt({ from: PEER, type: 'played' }))[0]?.state, 'played');
    const group = await receipt({ from: GROUP, participant: MEMBER_LID, type: 'read' });
    assert.deepEqual(group[0]?.source, { chat: GROUP, sender: MEMBER, isFromMe: false, isGroup: true });
    assert.equal(group[0]?.state, 'read');
    // A contact viewing the account's status (docs/decisions/0044-status-stories.md): the viewer is the sender.
    const view = await receipt({ from: 'status@broadcast', participant: MEMBER_LID, type: 'read' });
    assert.deepEqual(view, [
      {
        type: 'receipt',
        state: 'read',
        messageIds: ['3EB0R1'],
        source: { chat: 'status@broadcast', sender: MEMBER, isFromMe: false, isGroup: false },
        timestamp: 1_700_000_500_000,
      },
    ]);
    const self = await receipt({ from: ME_PHONE_JID, recipient: PEER, type: 'read-self' });
    assert.deepEqual(self[0]?.source, { chat: PEER, sender: ME_PHONE_JID, isFromMe: true, isGroup: false });
  });

  it('chat presence from <chatstate> stanzas: composing, recording (audio), paused', async () => {
    const state = async (from: string, child: BinaryNode, participant?: string) =>
      presenceFromChatstate(
        await wire({
          tag: 'chatstate',
          attrs: { from, ...(participant ? { participant } : {}) },
          content: [child],
        }),
        ctx,
      );
    assert.deepEqual(await state(PEER_LID, { tag: 'composing', attrs: {} }), {
      type: 'presence',
      source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
      state: 'composing',
      media: '',
    });
    assert.equal((await state(PEER, { tag: 'composing', attrs: { media: 'audio' } }))?.type, 'presence');
    assert.deepEqual(await state(GROUP, { tag: 'composing', attrs: { media: 'audio' } }, MEMBER_LID), {
      type: 'presence',
      source: { chat: GROUP, sender: MEMBER, isFromMe: false, isGroup: true },
      state: 'composing',
      media: 'audio',
    });
    assert.equal(
      (await state(PEER, { tag: 'paused', attrs: {} }))?.type === 'presence' && 'paused',
      'paused',
    );
  });
});
