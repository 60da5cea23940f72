/**
 * A LID chat becomes its phone JID's once the pair is stored (docs/decisions/0038-lid-mappings.md): the messages kept
 * under `<lid>@lid` move to `<phone>@s.whatsapp.net` in the transaction that stores the pair, in batches, whole or
 * not at all, idempotently; rows of the batch not yet written move too; a message, receipt or read naming a LID whose
 * pair is kept goes to the phone JID's chat; an edit naming the phone JID changes a message kept with the LID as
 * sender. Migration 0033 moves what older versions left under a LID with a stored pair. Before, messages stayed under
 * the LID: unreachable by the chat routes once the pair was known, and receipts, edits and deletions naming the phone
 * JID missed them. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Migrator } from 'kysely';
import pino from 'pino';
import type { EngineEvent, EngineMessage, MessageSource } from '../../src/domain/messages.ts';
import { LidMappingProjection } from '../../src/events/lid-mapping-projection.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { createInstance } from '../../src/store/instances.ts';
import { upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { moveLidChatMessages } from '../../src/store/lid-moves.ts';
import { insertMessages } from '../../src/store/messages.ts';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const ME = '5511900000000@s.whatsapp.net';
const GROUP = '120363000000000001@g.us';
const AT = '2025-01-02T03:04:05.000Z';

let counter = 0;
/** A text message of `source` (`at` epoch ms), with a fresh id. */
function message(source: MessageSource, text: string, at = Date.UTC(2025, 0, 2, 3, 4, 5)): EngineMessage {
  counter += 1;
  return {
    id: `M${String(counter).padStart(6, '0')}`,
    source,
    pushName: 'P',
    timestamp: at + counter,
    content: { kind: 'text', text },
  };
}
const from = (chat: string, sender = chat): MessageSource => ({
  chat,
  sender,
  isFromMe: false,
  isGroup: false,
});
const to = (chat: string): MessageSource => ({ chat, sender: ME, isFromMe: true, isGroup: false });
const inGroup = (sender: string): MessageSource => ({ chat: GROUP, sender, isFromMe: false, isGroup: true });

for (const dialect of testDialects()) {
  describe(`a LID chat moves to its phone JID once the pair is stored [${dialect}]`, () => {
    let ts: TestStore;
    let one: string;
    let two: string;
    let recorder: EventRecorder;
    const rows = (instanceId: string) =>
      ts.store.db
        .selectFrom('messages')
        .select(['id', 'chat', 'sender', 'state', 'content'])
        .where('instance_id', '=', instanceId)
        .orderBy('id')
        .execute();
    const row = async (instanceId: string, id: string) => (await rows(instanceId)).find((r) => r.id === id);

    before(async () => {
      ts = await createTestStore(dialect);
      const org = await createOrganization(ts.store.db, { name: 'lid chats', plan: 'pro' });
      one = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'one' })).id;
      two = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'two' })).id;
      const clock = () => Date.UTC(2025, 0, 3);
      recorder = new EventRecorder(
        ts.store.db,
        [new MessageProjection(clock), new LidMappingProjection(clock)],
        pino({ level: 'silent' }),
      );
    });
    after(() => ts.cleanup());

    it('moves a chat in batches, the LID sender renamed, the own and group rows kept; idempotent', async () => {
      const db = ts.store.db;
      const lid = '111@lid';
      const phone = '5511911110000@s.whatsapp.net';
      const chat = [
        ...Array.from({ length: 5 }, (_, i) => message(from(lid), `in ${i}`)),
        message(to(lid), 'reply'),
        message(from(lid), '👍'),
      ];
      const group = message(inGroup(lid), 'in the group');
      const other = message(from('222@lid'), 'another LID');
      await insertMessages(
        db,
        one,
        [...chat, group, other].map((m) => ({ message: m, state: 'delivered' })),
        AT,
      );
      await insertMessages(
        db,
        two,
        [{ message: message(from(lid), 'other instance'), state: 'delivered' }],
        AT,
      );
      const pairs = [{ lid: '111', phone: '5511911110000' }];
      assert.equal(
        await moveLidChatMessages(db, one, pairs, 2),
        8,
        'every row of the chat and the group row, 2 a statement',
      );
      const stored = await rows(one);
      for (const m of chat) {
        const moved = stored.find((r) => r.id === m.id);
        assert.deepEqual([moved?.chat, moved?.sender], [phone, m.source.isFromMe ? ME : phone], m.id);
      }
      assert.deepEqual(
        [(await row(one, group.id))?.chat, (await row(one, group.id))?.sender],
        [GROUP, phone],
        "a group message's LID sender is renamed",
      );
      assert.deepEqual((await row(one, other.id))?.chat, '222@lid', 'another LID stays');
      assert.deepEqual(
        (await rows(two)).map((r) => r.chat),
        [lid],
        'another instance is apart',
      );
      assert.equal(await moveLidChatMessages(db, one, pairs, 2), 0, 'nothing left to move');
      assert.equal(await moveLidChatMessages(db, one, [], 2), 0);
      await assert.rejects(moveLidChatMessages(db, one, pairs, 0), RangeError);
    });

    it('the recorder moves the stored chat and the rows of its own batch when it stores the pair', async () => {
      const lid = '333@lid';
      const phone = '5511933330000@s.whatsapp.net';
      const stored = message(from(lid), 'stored before');
      await recorder.record(one, { type: 'message', message: stored });
      const buffered = message(from(lid), 'in the same batch');
      const after = message(from(lid), 'after the pair, still by LID');
      // One batch: the first transaction starts after the four are queued.
      await Promise.all(
        [
          { type: 'message', message: buffered },
          { type: 'lid-mapping', mappings: [{ lid: '333', phone: '5511933330000' }] },
          { type: 'message', message: after },
        ].map((event) => recorder.record(one, event as EngineEvent)),
      );
      for (const m of [stored, buffered, after]) {
        const moved = await row(one, m.id);
        assert.deepEqual([moved?.chat, moved?.sender], [phone, phone], m.content.text);
      }
      const peer = await ts.store.db
        .selectFrom('chat_peers')
        .select('jid')
        .where('instance_id', '=', one)
        .where('jid', '=', phone)
        .executeTakeFirst();
      assert.ok(peer, 'a message stored under the phone JID makes its user a peer');
    });

    it('a message, a receipt and a read naming a LID whose pair is kept go to the phone JID chat', async () => {
      const lid = '444@lid';
      const phone = '5511944440000@s.whatsapp.net';
      await upsertLidMappings(ts.store.db, one, [{ lid: '444', phone: '5511944440000' }], 1);
      const sent = message(to(phone), 'sent by phone');
      const got = message(from(lid), 'received by LID, the engine not knowing the pair');
      const groupByLid = message(inGroup(lid), 'a member by LID');
      for (const m of [sent, got, groupByLid]) await recorder.record(one, { type: 'message', message: m });
      assert.deepEqual(
        [
          (await row(one, got.id))?.chat,
          (await row(one, got.id))?.sender,
          (await row(one, groupByLid.id))?.sender,
        ],
        [phone, phone, phone],
      );
      await recorder.record(one, {
        type: 'receipt',
        state: 'read',
        messageIds: [sent.id],
        source: from(lid),
        timestamp: 1,
      });
      assert.equal(
        (await row(one, sent.id))?.state,
        'read',
        'the receipt by LID moved the phone chat message',
      );
      await recorder.record(one, { type: 'read', chat: lid, messageIds: [got.id] });
      assert.equal((await row(one, got.id))?.state, 'read');
    });

    it('an edit and a deletion naming the phone JID change the message kept with the LID', async () => {
      const lid = '555@lid';
      const phone = '5511955550000@s.whatsapp.net';
      // A group message stored while the pair was unknown keeps the LID as its sender.
      const group = message(inGroup(lid), 'typo');
      await insertMessages(ts.store.db, one, [{ message: group, state: 'delivered' }], AT);
      await upsertLidMappings(ts.store.db, one, [{ lid: '555', phone: '5511955550000' }], 1);
      await recorder.record(one, {
        type: 'messageUpdate',
        update: { kind: 'edit', messageId: group.id, source: inGroup(phone), text: 'fixed', timestamp: 2 },
      });
      assert.equal(JSON.parse((await row(one, group.id))?.content ?? '{}').text, 'fixed');
      // A 1:1 message the engine stored under the LID, and the pair just learned: the update names the phone JID.
      const lone = message(from('666@lid'), 'secret');
      await recorder.record(one, { type: 'message', message: lone });
      await Promise.all(
        [
          { type: 'lid-mapping', mappings: [{ lid: '666', phone: '5511966660000' }] },
          {
            type: 'messageUpdate',
            update: {
              kind: 'delete',
              messageId: lone.id,
              source: from('5511966660000@s.whatsapp.net'),
              timestamp: 3,
            },
          },
        ].map((event) => recorder.record(one, event as EngineEvent)),
      );
      const deleted = JSON.parse((await row(one, lone.id))?.content ?? '{}');
      assert.deepEqual([deleted.text, deleted.deletedAt], [undefined, 3]);
      // Someone else's edit still changes nothing.
      const third = message(from(phone), 'mine');
      await recorder.record(one, { type: 'message', message: third });
      await recorder.record(one, {
        type: 'messageUpdate',
        update: { kind: 'edit', messageId: third.id, source: from('777@lid'), text: 'forged', timestamp: 4 },
      });
      assert.equal(JSON.parse((await row(one, third.id))?.content ?? '{}').text, 'mine');
    });
  });

  describe(`migration 0033 moves the LID chats whose pair is stored [${dialect}]`, () => {
    let t: TestStore;
    before(async () => {
      t = await createTestStore(dialect);
    });
    after(() => t.cleanup());

    it('moves them, sender too where it was the LID; other chats and instances are kept', async () => {
      const db = t.store.db;
      const migrator = new Migrator({
        db,
        provider: migrationProvider,
        ...(t.store.schema === undefined ? {} : { migrationTableSchema: t.store.schema }),
      });
      const down = await migrator.migrateTo('0030_sync_send_job_attempts');
      if (down.error) throw down.error;
      const org = await createOrganization(db, { name: 'migration', plan: 'pro' });
      const a = (await createInstance(db, { orgId: org.id, env: 'test', name: 'a' })).id;
      const b = (await createInstance(db, { orgId: org.id, env: 'test', name: 'b' })).id;
      const inLid = message(from('123@lid'), 'by LID');
      const outLid = message(to('123@lid'), 'to the LID');
      const unknown = message(from('999@lid'), 'no pair');
      const group = message(inGroup('123@lid'), 'in a group');
      await insertMessages(
        db,
        a,
        [inLid, outLid, unknown, group].map((m) => ({ message: m, state: 'delivered' })),
        AT,
      );
      const elsewhere = message(from('123@lid'), 'instance b has no pair');
      await insertMessages(db, b, [{ message: elsewhere, state: 'delivered' }], AT);
      await upsertLidMappings(db, a, [{ lid: '123', phone: '5511912300000' }], 1);
      const up = await migrator.migrateTo('0033_lid_chats_moved');
      if (up.error) throw up.error;
      const stored = await db.selectFrom('messages').select(['id', 'chat', 'sender']).orderBy('id').execute();
      const phone = '5511912300000@s.whatsapp.net';
      assert.deepEqual(
        stored.map((r) => [r.id, r.chat, r.sender]),
        [
          [inLid.id, phone, phone],
          [outLid.id, phone, ME],
          [unknown.id, '999@lid', '999@lid'],
          [group.id, GROUP, '123@lid'],
          [elsewhere.id, '123@lid', '123@lid'],
        ],
      );
    });
  });
}
