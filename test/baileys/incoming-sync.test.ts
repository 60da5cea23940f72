import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jidNormalizedUser, processHistoryMessage, proto } from 'baileys';
import { extractGroupMetadata } from 'baileys/lib/Socket/groups.js';
import { ContactQueryProtocol } from '../../src/engines/baileys/contacts.ts';
import { isAdminOf, toGroupInfo } from '../../src/engines/baileys/groups.ts';
import { historyFromSet, type MappingContext } from '../../src/engines/baileys/incoming.ts';
import { ME } from './fake-socket.ts';
import {
  GROUP,
  type MappingFixture,
  ME_PHONE_JID,
  MEMBER,
  MEMBER_LID,
  mappingFixture,
  NOW,
  wire,
} from './mapping-fixture.ts';
import { silentLogger } from './support.ts';

const logger = silentLogger();

/**
 * Platform history, groups and contacts → domain values, on fixtures from Baileys' own encoders and decoders:
 * history sync with phone JIDs and the LID pairs it teaches, group metadata with every JID a phone JID, and what the
 * contact protocol keeps of each number. Messages, receipts and presence: incoming.test.ts.
 */
describe("platform history, groups and contacts → domain values, on fixtures from Baileys' encoders/decoders", () => {
  let fixture: MappingFixture;
  let ctx: MappingContext;
  before(async () => {
    fixture = await mappingFixture();
    ctx = fixture.ctx;
  });
  after(() => fixture.cleanup());

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
