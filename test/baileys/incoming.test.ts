import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  addTransactionCapability,
  areJidsSameUser,
  type BinaryNode,
  decodeBinaryNode,
  decodeMessageNode,
  decryptMessageNode,
  encodeBinaryNode,
  getStatusFromReceiptType,
  initAuthCreds,
  isJidGroup,
  isJidStatusBroadcast,
  jidNormalizedUser,
  type MessageUserReceiptUpdate,
  processHistoryMessage,
  proto,
  type WAMessage,
  type WAMessageUpdate,
} from 'baileys';
import { makeLibSignalRepository } from 'baileys/lib/Signal/libsignal.js';
import { extractGroupMetadata } from 'baileys/lib/Socket/groups.js';
import { loadAuthState } from '../../src/engines/baileys/auth-state.ts';
import { ContactQueryProtocol } from '../../src/engines/baileys/contacts.ts';
import { isAdminOf, toGroupInfo } from '../../src/engines/baileys/groups.ts';
import {
  historyFromSet,
  type MappingContext,
  presenceFromChatstate,
  receiptsFromGroupUpdates,
  receiptsFromUpdates,
  toEngineMessage,
} from '../../src/engines/baileys/incoming.ts';
import { JidResolver } from '../../src/engines/baileys/jid.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { ME } from './fake-socket.ts';
import { type LiveFixture, liveFixture, silentLogger } from './support.ts';

const logger = silentLogger();
const PEER_LID = '12345678@lid';
const PEER = '5511988887777@s.whatsapp.net';
const MEMBER_LID = '777000111@lid';
const MEMBER = '5511977776666@s.whatsapp.net';
const GROUP = '120363000000000001@g.us';
const ME_PHONE_JID = `${ME.phone}@s.whatsapp.net`;
const NOW = Date.parse('2030-01-01T00:00:00Z');

/** Encodes a stanza with Baileys' binary encoder and decodes it back, as it arrives from the socket. */
async function wire(node: BinaryNode): Promise<BinaryNode> {
  return decodeBinaryNode(encodeBinaryNode(node));
}

/** A `<message>` stanza whose payload is a `<plaintext>` protobuf (decrypted by Baileys without signal keys). */
function messageStanza(attrs: Record<string, string>, message: proto.IMessage): BinaryNode {
  return {
    tag: 'message',
    attrs: {
      id: `3EB0${randomBytes(8).toString('hex').toUpperCase()}`,
      t: '1700000000',
      type: 'text',
      ...attrs,
    },
    content: [{ tag: 'plaintext', attrs: {}, content: proto.Message.encode(message).finish() }],
  };
}

describe("platform events → domain events, on fixtures from Baileys' encoders/decoders", () => {
  let fixture: LiveFixture;
  let repository: ReturnType<typeof makeLibSignalRepository>;
  let ctx: MappingContext;

  before(async () => {
    fixture = await liveFixture('sqlite');
    const store = new SqlAuthStateStore(fixture.test.store.db, fixture.box, fixture.instanceIds[0] ?? '');
    const loaded = await loadAuthState(store, logger);
    const keys = addTransactionCapability(loaded.state.keys, logger, {
      maxCommitRetries: 1,
      delayBetweenTriesMs: 1,
    });
    repository = makeLibSignalRepository({ creds: initAuthCreds(), keys }, logger);
    await repository.lidMapping.storeLIDPNMappings([
      { lid: '31313131@lid', pn: '5511933332222@s.whatsapp.net' },
    ]);
    const resolver = new JidResolver({ lookup: () => repository.lidMapping });
    ctx = {
      resolver,
      me: () => ({ phoneJid: ME_PHONE_JID, lid: jidNormalizedUser(ME.lid), pushName: ME.name }),
    };
  });
  after(async () => {
    await fixture.test.cleanup();
  });

  /**
   * Decodes a stanza as the socket does: Baileys' binary decoder, then `decryptMessageNode` (which parses the
   * envelope with `decodeMessageNode` and opens the `<plaintext>` payload).
   */
  async function decode(stanza: BinaryNode): Promise<WAMessage> {
    const node = await wire(stanza);
    const { fullMessage, decrypt } = decryptMessageNode(node, ME.id, ME.lid, repository, logger);
    assert.deepEqual(fullMessage.key, decodeMessageNode(node, ME.id, ME.lid).fullMessage.key);
    await decrypt();
    return fullMessage;
  }

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

  it('history sync (processHistoryMessage): chats and messages with phone JIDs, LID pairs remembered', async () => {
    const sync = proto.HistorySync.decode(
      proto.HistorySync.encode({
        syncType: proto.HistorySync.HistorySyncType.INITIAL_BOOTSTRAP,
        progress: 40,
        phoneNumberToLidMappings: [{ pnJid: '5511944443333@s.whatsapp.net', lidJid: '4444@lid' }],
        conversations: [
          {
            id: '9090@lid',
            pnJid: '5511990909090@s.whatsapp.net',
            name: 'Caio',
            messages: [
              {
                message: {
                  key: { remoteJid: '9090@lid', fromMe: false, id: 'H1' },
                  message: { conversation: 'old one' },
                  messageTimestamp: 1_690_000_000,
                  pushName: 'Caio',
                },
              },
            ],
          },
          {
            id: GROUP,
            name: 'Team',
            messages: [
              {
                message: {
                  key: { remoteJid: GROUP, fromMe: false, id: 'H2', participant: '4444@lid' },
                  message: { conversation: 'group old' },
                  messageTimestamp: 1_690_000_100,
                },
              },
            ],
          },
        ],
      }).finish(),
    );
    const data = processHistoryMessage(sync, logger);
    const event = await historyFromSet(
      { ...data, syncType: data.syncType ?? null, progress: data.progress ?? null },
      ctx,
      NOW,
    );
    assert.equal(event.syncType, 'INITIAL_BOOTSTRAP');
    assert.equal(event.progress, 40);
    assert.deepEqual(
      event.chats.map((c) => ({
        jid: c.jid,
        name: c.name,
        messages: c.messages.map((m) => [m.id, m.source, m.content.text]),
      })),
      [
        {
          jid: '5511990909090@s.whatsapp.net',
          name: 'Caio',
          messages: [
            [
              'H1',
              {
                chat: '5511990909090@s.whatsapp.net',
                sender: '5511990909090@s.whatsapp.net',
                isFromMe: false,
                isGroup: false,
              },
              'old one',
            ],
          ],
        },
        {
          jid: GROUP,
          name: 'Team',
          messages: [
            [
              'H2',
              { chat: GROUP, sender: '5511944443333@s.whatsapp.net', isFromMe: false, isGroup: true },
              'group old',
            ],
          ],
        },
      ],
    );
  });

  it('group metadata (extractGroupMetadata): every JID a phone JID, flags and timer, admin check', async () => {
    const iq = await wire({
      tag: 'iq',
      attrs: { type: 'result', from: GROUP },
      content: [
        {
          tag: 'group',
          attrs: {
            id: '120363000000000001',
            creator: jidNormalizedUser(ME.lid),
            creator_pn: ME_PHONE_JID,
            subject: 'Team',
            s_t: '1700000100',
            s_o: MEMBER_LID,
            s_o_pn: MEMBER,
            creation: '1700000000',
            addressing_mode: 'lid',
          },
          content: [
            {
              tag: 'description',
              attrs: { id: 'D1', participant: MEMBER_LID, t: '1700000200' },
              content: [{ tag: 'body', attrs: {}, content: Buffer.from('Topic here') }],
            },
            {
              tag: 'participant',
              attrs: { jid: jidNormalizedUser(ME.lid), phone_number: ME_PHONE_JID, type: 'superadmin' },
            },
            { tag: 'participant', attrs: { jid: MEMBER_LID, phone_number: MEMBER, type: 'admin' } },
            { tag: 'participant', attrs: { jid: '5511955554444@s.whatsapp.net', lid: '5555@lid' } },
            { tag: 'announcement', attrs: {} },
            { tag: 'locked', attrs: {} },
            { tag: 'ephemeral', attrs: { expiration: '604800' } },
          ],
        },
      ],
    });
    const meta = extractGroupMetadata(iq);
    assert.deepEqual(await toGroupInfo(meta, ctx), {
      jid: GROUP,
      name: 'Team',
      topic: 'Topic here',
      ownerJid: ME_PHONE_JID,
      created: 1_700_000_000_000,
      nameSetAt: 1_700_000_100_000,
      nameSetBy: MEMBER,
      isAnnounce: true,
      isLocked: true,
      isEphemeral: true,
      disappearingTimer: 604_800,
      participants: [
        { jid: ME_PHONE_JID, isAdmin: true, isSuperAdmin: true },
        { jid: MEMBER, isAdmin: true, isSuperAdmin: false },
        { jid: '5511955554444@s.whatsapp.net', isAdmin: false, isSuperAdmin: false },
      ],
    });
    assert.equal(isAdminOf(meta, ctx.me()), true);
    assert.equal(isAdminOf(meta, { phoneJid: '5511955554444@s.whatsapp.net', lid: null }), false);
    assert.equal((await ctx.resolver.resolve('5555@lid')).jid, '5511955554444@s.whatsapp.net');
  });

  it('the contact protocol keeps what the platform matched each number to', () => {
    const protocol = new ContactQueryProtocol();
    assert.deepEqual(
      protocol.parser({ tag: 'contact', attrs: { type: 'in' }, content: Buffer.from('+5511988887777') }),
      {
        registered: true,
        query: '5511988887777',
      },
    );
  });
});
