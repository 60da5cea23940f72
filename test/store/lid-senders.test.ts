/**
 * Once an instance keeps a LID's pair, the LID names nobody in the message store any more
 * (docs/decisions/0038-lid-mappings.md): a group member's LID sender is renamed to the phone JID in the transaction
 * that stores the pair, stored rows and rows of the recorder's batch alike, and the user of a moved LID chat or of a
 * renamed member becomes a chat peer under the phone JID with the name its messages carried (a name the peer has is
 * kept). Migration 0035 does the same for what older versions left. Before, group messages kept the LID sender
 * (group history named the member by LID though the number was known), and a moved chat had no name in the chat list
 * and no contact until the user wrote again. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Migrator } from 'kysely';
import pino from 'pino';
import type { EngineEvent, EngineMessage, MessageSource } from '../../src/domain/messages.ts';
import { LidMappingProjection } from '../../src/events/lid-mapping-projection.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { listChats, listHistory } from '../../src/store/chats.ts';
import { createInstance } from '../../src/store/instances.ts';
import { upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { moveLidChatMessages } from '../../src/store/lid-moves.ts';
import { insertMessages, listChatPeers, touchPeers } from '../../src/store/messages.ts';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { openTracedStore, planOf } from '../support/plans.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const ME = '5511900000000@s.whatsapp.net';
const GROUP = '120363000000000002@g.us';
const RECORDED = Date.UTC(2025, 0, 3);

let counter = 0;
/** A text message of `source` named `pushName`, with a fresh id and a timestamp after the one before. */
function message(source: MessageSource, text: string, pushName = ''): EngineMessage {
  counter += 1;
  return {
    id: `S${String(counter).padStart(6, '0')}`,
    source,
    pushName,
    timestamp: Date.UTC(2025, 0, 2) + counter,
    content: { kind: 'text', text },
  };
}
const from = (chat: string): MessageSource => ({ chat, sender: chat, isFromMe: false, isGroup: false });
const to = (chat: string): MessageSource => ({ chat, sender: ME, isFromMe: true, isGroup: false });
const inGroup = (sender: string): MessageSource => ({ chat: GROUP, sender, isFromMe: false, isGroup: true });

for (const dialect of testDialects()) {
  describe(`a kept pair's LID names nobody in the message store [${dialect}]`, () => {
    let ts: TestStore;
    let instanceId: string;
    let recorder: EventRecorder;
    const senderOf = async (id: string) =>
      (
        await ts.store.db
          .selectFrom('messages')
          .select('sender')
          .where('instance_id', '=', instanceId)
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      ).sender;
    const peer = async (jid: string) =>
      (await listChatPeers(ts.store.db, instanceId)).find((p) => p.jid === jid);

    before(async () => {
      ts = await createTestStore(dialect);
      const org = await createOrganization(ts.store.db, { name: 'lid senders', plan: 'pro' });
      instanceId = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 's' })).id;
      const clock = () => RECORDED;
      recorder = new EventRecorder(
        ts.store.db,
        [new MessageProjection(clock), new LidMappingProjection(clock)],
        pino({ level: 'silent' }),
      );
    });
    after(() => ts.cleanup());

    it("a group member's LID sender, stored or in the pair's batch, is renamed; the member becomes a named peer", async () => {
      const lid = '881@lid';
      const phone = '5511988100000@s.whatsapp.net';
      const stored = message(inGroup(lid), 'stored before', 'Member');
      await recorder.record(instanceId, { type: 'message', message: stored });
      assert.equal(await peer(phone), undefined, 'no peer while the number is unknown');
      const buffered = message(inGroup(lid), 'in the same batch', 'Member Renamed');
      const later = message(inGroup(lid), 'after the pair, still by LID');
      // One batch: the first transaction starts after the three are queued.
      await Promise.all(
        [
          { type: 'message', message: buffered },
          { type: 'lid-mapping', mappings: [{ lid: '881', phone: '5511988100000' }] },
          { type: 'message', message: later },
        ].map((event) => recorder.record(instanceId, event as EngineEvent)),
      );
      for (const m of [stored, buffered, later]) assert.equal(await senderOf(m.id), phone, m.content.text);
      const history = await listHistory(ts.store.db, instanceId, GROUP, 10);
      assert.deepEqual(
        history.map((m) => m.source.sender),
        [phone, phone, phone],
        'group history names the member by number',
      );
      assert.deepEqual(
        [(await peer(phone))?.pushName, (await peer(phone))?.firstAt],
        ['Member Renamed', new Date(RECORDED).toISOString()],
      );
    });

    it("a moved LID chat brings its user's name to the phone JID: the chat list and the contacts show it", async () => {
      const lid = '991@lid';
      const phone = '5511999100000@s.whatsapp.net';
      await recorder.record(instanceId, { type: 'message', message: message(from(lid), 'hi', 'Private') });
      await recorder.record(instanceId, { type: 'message', message: message(from(lid), 'again', '') });
      await recorder.record(instanceId, { type: 'message', message: message(to(lid), 'hello') });
      await recorder.record(instanceId, {
        type: 'lid-mapping',
        mappings: [{ lid: '991', phone: '5511999100000' }],
      });
      const chat = (await listChats(ts.store.db, instanceId, 50)).find((c) => c.jid === phone);
      assert.deepEqual([chat?.name, chat?.unread], ['Private', 2]);
      const known = await peer(phone);
      assert.deepEqual(
        [known?.pushName, known?.firstAt, known?.lastAt],
        ['Private', new Date(RECORDED).toISOString(), new Date(RECORDED).toISOString()],
      );
    });

    it("a peer without a name takes the moved chat user's; one with a name keeps it", async () => {
      const db = ts.store.db;
      const unnamed = '5511977100000@s.whatsapp.net';
      const named = '5511977200000@s.whatsapp.net';
      // Written to by number before (no name), and a user whose own message named them.
      await touchPeers(db, instanceId, [{ jid: unnamed, pushName: '' }], '2025-01-01T00:00:00.000Z');
      await touchPeers(db, instanceId, [{ jid: named, pushName: 'Known' }], '2025-01-01T00:00:00.000Z');
      await insertMessages(
        db,
        instanceId,
        [
          { message: message(from('771@lid'), 'by LID', 'Anna'), state: 'delivered' },
          { message: message(from('772@lid'), 'by LID', 'Other name'), state: 'delivered' },
        ],
        '2025-01-04T00:00:00.000Z',
      );
      const moved = await moveLidChatMessages(db, instanceId, [
        { lid: '771', phone: '5511977100000' },
        { lid: '772', phone: '5511977200000' },
      ]);
      assert.equal(moved, 2);
      assert.deepEqual(
        [await peer(unnamed), await peer(named)].map((p) => [p?.pushName, p?.firstAt, p?.lastAt]),
        [
          ['Anna', '2025-01-01T00:00:00.000Z', '2025-01-04T00:00:00.000Z'],
          ['Known', '2025-01-01T00:00:00.000Z', '2025-01-04T00:00:00.000Z'],
        ],
      );
      assert.equal(await moveLidChatMessages(db, instanceId, [{ lid: '771', phone: '5511977100000' }]), 0);
    });

    it('the LID senders are found and renamed through messages_lid_senders', async () => {
      const traced = await openTracedStore(ts);
      try {
        const texts = await traced.statementsOf(
          () => moveLidChatMessages(traced.store.db, instanceId, [{ lid: '1', phone: '5511900000001' }]),
          'sender',
        );
        const lookups = texts.filter((text) => /like '%@lid'/.test(text));
        assert.equal(lookups.length, 1, texts.join('\n'));
        for (const text of lookups) {
          const plan = await planOf(ts.store.db, dialect, text);
          assert.match(plan, /messages_lid_senders/, plan);
        }
        await insertMessages(
          ts.store.db,
          instanceId,
          [{ message: message(inGroup('2@lid'), 'x'), state: 'delivered' }],
          '2025-01-04T00:00:00.000Z',
        );
        const renames = (
          await traced.statementsOf(
            () => moveLidChatMessages(traced.store.db, instanceId, [{ lid: '2', phone: '5511900000002' }]),
            'update',
          )
        ).filter((text) => /like '%@lid'/.test(text));
        assert.equal(renames.length, 1, renames.join('\n'));
        for (const text of renames) {
          const plan = await planOf(ts.store.db, dialect, text);
          assert.match(plan, /messages_lid_senders/, plan);
        }
      } finally {
        await traced.store.destroy();
      }
    });
  });

  describe(`migration 0035 renames the LID senders whose pair is kept and names their users [${dialect}]`, () => {
    let t: TestStore;
    before(async () => {
      t = await createTestStore(dialect);
    });
    after(() => t.cleanup());

    it('renames the group senders, makes their users and the moved chats named peers; the rest is kept', async () => {
      const db = t.store.db;
      const migrator = new Migrator({
        db,
        provider: migrationProvider,
        ...(t.store.schema === undefined ? {} : { migrationTableSchema: t.store.schema }),
      });
      const down = await migrator.migrateTo('0033_lid_chats_moved');
      if (down.error) throw down.error;
      const org = await createOrganization(db, { name: 'migration 35', plan: 'pro' });
      const a = (await createInstance(db, { orgId: org.id, env: 'test', name: 'a' })).id;
      const b = (await createInstance(db, { orgId: org.id, env: 'test', name: 'b' })).id;
      const member = message(inGroup('123@lid'), 'a member by LID', 'Member');
      const memberAgain = message(inGroup('123@lid'), 'again, unnamed');
      const own = message({ chat: GROUP, sender: '124@lid', isFromMe: true, isGroup: true }, 'own by LID');
      const unknown = message(inGroup('999@lid'), 'no pair', 'Nobody');
      // A LID chat moved by migration 0033 or the recorder before: its user had no peer row.
      const moved = message(from('5511912500000@s.whatsapp.net'), 'moved before', 'Moved');
      // A chat whose user had a peer row without a name.
      const unnamedPeer = message(from('5511912600000@s.whatsapp.net'), 'named message', 'Late');
      // A peer with a name of its own.
      const namedPeer = message(from('5511912700000@s.whatsapp.net'), 'other name', 'Other');
      await insertMessages(
        db,
        a,
        [member, memberAgain, own, unknown, moved, unnamedPeer, namedPeer].map((m) => ({
          message: m,
          state: 'delivered',
        })),
        '2025-01-05T00:00:00.000Z',
      );
      await touchPeers(
        db,
        a,
        [
          { jid: '5511912600000@s.whatsapp.net', pushName: '' },
          { jid: '5511912700000@s.whatsapp.net', pushName: 'Mine' },
        ],
        '2025-01-06T00:00:00.000Z',
      );
      const elsewhere = message(inGroup('123@lid'), 'instance b has no pair', 'B');
      await insertMessages(db, b, [{ message: elsewhere, state: 'delivered' }], '2025-01-05T00:00:00.000Z');
      for (const [lid, phone] of [
        ['123', '5511912300000'],
        ['124', '5511900000000'],
        ['125', '5511912500000'],
        ['126', '5511912600000'],
        ['127', '5511912700000'],
      ] as const)
        await upsertLidMappings(db, a, [{ lid, phone }], 1);
      const up = await migrator.migrateToLatest();
      if (up.error) throw up.error;
      const senders = await db.selectFrom('messages').select(['id', 'sender']).orderBy('id').execute();
      assert.deepEqual(
        senders.map((r) => [r.id, r.sender]),
        [
          [member.id, '5511912300000@s.whatsapp.net'],
          [memberAgain.id, '5511912300000@s.whatsapp.net'],
          [own.id, ME],
          [unknown.id, '999@lid'],
          [moved.id, '5511912500000@s.whatsapp.net'],
          [unnamedPeer.id, '5511912600000@s.whatsapp.net'],
          [namedPeer.id, '5511912700000@s.whatsapp.net'],
          [elsewhere.id, '123@lid'],
        ],
      );
      const peers = await db
        .selectFrom('chat_peers')
        .select(['instance_id', 'jid', 'push_name', 'first_at', 'last_at'])
        .orderBy('instance_id')
        .orderBy('jid')
        .execute();
      const at = (iso: string) => Date.parse(iso);
      const [fifth, sixth] = [at('2025-01-05T00:00:00.000Z'), at('2025-01-06T00:00:00.000Z')];
      assert.deepEqual(
        peers.map((p) => [p.instance_id === a, p.jid, p.push_name, Number(p.first_at), Number(p.last_at)]),
        [
          [true, '5511912300000@s.whatsapp.net', 'Member', fifth, fifth],
          [true, '5511912500000@s.whatsapp.net', 'Moved', fifth, fifth],
          [true, '5511912600000@s.whatsapp.net', 'Late', fifth, sixth],
          [true, '5511912700000@s.whatsapp.net', 'Mine', fifth, sixth],
        ],
        'peers of instance a only; the own LID (the account) makes none',
      );
    });
  });
}
