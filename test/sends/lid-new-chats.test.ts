/**
 * The new-chats-per-day pace counts a user once whichever address a send names them by
 * (docs/decisions/0013-pacing.md, docs/decisions/0038-lid-mappings.md): a send to `<lid>@lid` keeps the LID in its
 * job row while its message, and every message of the chat once the pair is kept, is stored under the phone JID. The
 * check that a chat is not new, and the look-back of a cap set later, read a LID job's chat under the phone JID of
 * its kept pair too. Before, they read the LID alone: a send by LID to a user already written to by number opened a
 * chat again (held or refused past the cap), and a cap set later counted a LID send as opening a chat that the user
 * had written first. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { LidMappingProjection } from '../../src/events/lid-mapping-projection.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { createInstance } from '../../src/store/instances.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { chatHasHistory, markNewChatsSince } from '../../src/store/send-pacing.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-05-04T09:00:00.000Z');
const OWN = '5511999990001';
const ME = `${OWN}@s.whatsapp.net`;

/**
 * Registers the suite's app on `dialect` (a sandbox instance logged in as {@link OWN} at {@link T0}, limits out of
 * the way): `app()` gives it inside a test, `jobRow(id)` reads a send job's chat, status and new-chat mark.
 */
function loggedInApp(dialect: Parameters<typeof createTestStore>[0]) {
  let app: TestApp | undefined;
  before(async () => {
    app = await createTestApp({
      dialect,
      plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
    });
    app.clock.set(T0);
    await loginSandbox(app, OWN);
  });
  after(() => app?.close());
  const current = (): TestApp => {
    if (!app) throw new Error('the suite has no app yet');
    return app;
  };
  const jobRow = (id: string) =>
    current()
      .services.store.db.selectFrom('send_jobs')
      .select(['chat', 'status', 'new_chat'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  return { app: current, jobRow };
}

for (const dialect of testDialects()) {
  describe(`the new-chats pace counts a user once, by number or by LID [${dialect}]`, () => {
    const suite = loggedInApp(dialect);

    it('a send by LID to a user written to by number is not a new chat (sandbox)', async () => {
      const t = suite.app();
      const { jobRow } = suite;
      const cap = await t.call('PUT', '/v1/session/pacing', { newChatsPerDay: 1 });
      assert.equal(cap.status, 200, JSON.stringify(cap.body));
      const user = '5511988887777';
      // The sandbox's LID of a number: its length in two digits, then its digits reversed.
      const lid = `13${[...user].reverse().join('')}@lid`;
      const byNumber = await t.call('POST', '/v1/messages/send', { phone: user, body: 'hello' });
      assert.equal(byNumber.status, 200, JSON.stringify(byNumber.body));
      assert.deepEqual(await jobRow(byNumber.body.data.id), {
        chat: `${user}@s.whatsapp.net`,
        status: 'sent',
        new_chat: 1,
      });
      const byLid = await t.call('POST', '/v1/messages/send', { phone: lid, body: 'again, by LID' });
      assert.equal(byLid.status, 200, `the same chat, not a second new one: ${JSON.stringify(byLid.body)}`);
      assert.deepEqual(await jobRow(byLid.body.data.id), { chat: lid, status: 'sent', new_chat: 0 });
      const history = await t.call('GET', `/v1/chats/${user}/messages`);
      assert.deepEqual(
        new Set(history.body.data.messages.map((m: { id: string }) => m.id)),
        new Set([byNumber.body.data.id, byLid.body.data.id]),
        'both messages are in the phone JID chat',
      );
      // A user never written to is a new chat, by LID as by number: the cap of 1 is spent.
      const other = '5511977776666';
      const refused = await t.call('POST', '/v1/messages/send', {
        phone: `13${[...other].reverse().join('')}@lid`,
        body: 'hi',
      });
      assert.equal(refused.status, 429, JSON.stringify(refused.body));
      await t.call('PUT', '/v1/session/pacing', {});
    });
  });

  describe(`queued by number while the pair is unknown, then by LID: one chat opened [${dialect}]`, () => {
    const suite = loggedInApp(dialect);

    it('the LID send, judged once the number send taught the pair, is in the phone JID chat', async () => {
      const t = suite.app();
      const { jobRow } = suite;
      const cap = await t.call('PUT', '/v1/session/pacing', { newChatsPerDay: 1 });
      assert.equal(cap.status, 200, JSON.stringify(cap.body));
      const user = '5511988885555';
      const lid = `13${[...user].reverse().join('')}`;
      const pairs = () =>
        t.services.store.db
          .selectFrom('lid_mappings')
          .select(['lid', 'phone'])
          .where('instance_id', '=', t.instance.id)
          .where('lid', '=', lid)
          .execute();
      assert.deepEqual(await pairs(), [], 'no pair kept before the first send');
      const async = { prefer: 'respond-async' };
      const byNumber = await t.call('POST', '/v1/messages/send', { phone: user, body: 'hello' }, async);
      assert.equal(byNumber.status, 202, JSON.stringify(byNumber.body));
      const byLid = await t.call('POST', '/v1/messages/send', { phone: `${lid}@lid`, body: 'by LID' }, async);
      assert.equal(byLid.status, 202, JSON.stringify(byLid.body));
      t.services.sendQueue.wake(t.instance.id);
      await eventually('both relayed', async () => {
        const rows = await Promise.all([jobRow(byNumber.body.data.id), jobRow(byLid.body.data.id)]);
        return rows.every((row) => row.status === 'sent') ? rows : undefined;
      });
      assert.deepEqual(await pairs(), [{ lid, phone: user }], 'the number send taught the pair');
      assert.deepEqual(await jobRow(byNumber.body.data.id), {
        chat: `${user}@s.whatsapp.net`,
        status: 'sent',
        new_chat: 1,
      });
      assert.deepEqual(await jobRow(byLid.body.data.id), { chat: `${lid}@lid`, status: 'sent', new_chat: 0 });
    });
  });

  describe(`a cap set later reads a LID job's chat by its kept phone JID too [${dialect}]`, () => {
    let ts: TestStore;
    let instanceId: string;
    let recorder: EventRecorder;
    before(async () => {
      ts = await createTestStore(dialect);
      const org = await createOrganization(ts.store.db, { name: 'lid pacing', plan: 'pro' });
      instanceId = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'l' })).id;
      const clock = () => T0;
      recorder = new EventRecorder(
        ts.store.db,
        [new MessageProjection(clock), new LidMappingProjection(clock)],
        pino({ level: 'silent' }),
      );
    });
    after(() => ts.cleanup());

    /** A sent job of the instance to `chat`, relayed at `sentAt`, its message recorded at that time. */
    const sent = async (id: string, chat: string, sentAt: number, seq: number) => {
      await insertSendJob(ts.store.db, {
        instanceId,
        id,
        seq,
        chat,
        kind: 'text',
        payload: '',
        mode: 'async',
        runAt: sentAt,
        sendAt: null,
        maxAttempts: 3,
        now: sentAt,
      });
      await ts.store.db
        .updateTable('send_jobs')
        .set({ status: 'sent', sent_at: sentAt })
        .where('id', '=', id)
        .execute();
      await recorder.record(instanceId, {
        type: 'message',
        message: {
          id,
          source: { chat, sender: ME, isFromMe: true, isGroup: false },
          pushName: '',
          timestamp: sentAt,
          content: { kind: 'text', text: id },
        },
      });
    };

    it('a user who wrote first by LID, answered by LID, then the pair learned: no chat opened', async () => {
      const lid = '210987654321@lid';
      const phone = '5511966665555';
      // The user wrote first, by LID (the number unknown), and was answered by LID.
      await recorder.record(instanceId, {
        type: 'message',
        message: {
          id: 'LID-FIRST',
          source: { chat: lid, sender: lid, isFromMe: false, isGroup: false },
          pushName: 'Private',
          timestamp: T0 - 60_000,
          content: { kind: 'text', text: 'hello' },
        },
      });
      await sent('LID-ANSWER', lid, T0, 1);
      // A user never written to before, answered by LID: a chat opened.
      await sent('LID-OPENS', '210987654000@lid', T0 + 1_000, 2);
      await recorder.record(instanceId, {
        type: 'lid-mapping',
        mappings: [
          { lid: '210987654321', phone },
          { lid: '210987654000', phone: '5511966660000' },
        ],
      });
      const chats = await ts.store.db
        .selectFrom('messages')
        .select(['id', 'chat'])
        .where('instance_id', '=', instanceId)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        chats.map((row) => [row.id, row.chat]),
        [
          ['LID-ANSWER', `${phone}@s.whatsapp.net`],
          ['LID-FIRST', `${phone}@s.whatsapp.net`],
          ['LID-OPENS', '5511966660000@s.whatsapp.net'],
        ],
        'the chats moved with their pairs',
      );
      assert.equal(await chatHasHistory(ts.store.db, instanceId, lid, 'ANOTHER'), true, 'known by its LID');
      assert.equal(await markNewChatsSince(ts.store.db, instanceId, T0 - 3_600_000), 1);
      const flags = await ts.store.db
        .selectFrom('send_jobs')
        .select(['id', 'new_chat'])
        .where('instance_id', '=', instanceId)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        flags.map((row) => [row.id, row.new_chat]),
        [
          ['LID-ANSWER', 0],
          ['LID-OPENS', 1],
        ],
      );
    });
  });
}
