import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from '../webhooks/support.ts';

/**
 * The platform hands a message over again (an acknowledgement lost with a socket, then offline redelivery; stanzas
 * left unacknowledged at a node hand-over): the copy is told by the message's id (src/events/message-copies.ts,
 * docs/decisions/0024-engines-and-data-flow.md) and makes no second webhook event, sequence number or delivery, nor
 * touches the peer again; an event about the message (a receipt, an edit, a reaction) is not a copy.
 */
for (const dialect of testDialects()) {
  describe(`a message the platform hands over again is recorded once [${dialect}]`, () => {
    let testStore: TestStore;
    let counted: Store;
    let t: TestApp;
    let statements: string[] = [];
    let counting = false;

    before(async () => {
      testStore = await createTestStore(dialect);
      const faults = (text: string) => void (counting && statements.push(text));
      counted = await openStore(
        testStore.database,
        testStore.schema === undefined ? { faults } : { schema: testStore.schema, faults },
      );
      t = await createWebhookApp({ dialect, testStore: { ...testStore, store: counted } });
      // A webhook URL, so every webhook event also queues a delivery (nothing listens there).
      await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
    });
    after(async () => {
      await t.close();
      await counted.destroy();
      await testStore.cleanup();
    });

    /** The instance's webhook events naming message `id` in their body, as [type, sequence]. */
    const eventsOf = async (id: string) => {
      const rows = await counted.db
        .selectFrom('webhook_events')
        .select(['type', 'sequence', 'payload'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('sequence')
        .execute();
      return rows
        .filter((row) => row.payload.includes(id))
        .map((row) => [row.type, Number(row.sequence)] as const);
    };
    const lastSequence = async () => {
      const row = await counted.db
        .selectFrom('webhook_state')
        .select('last_sequence')
        .where('instance_id', '=', t.instance.id)
        .executeTakeFirst();
      return Number(row?.last_sequence ?? 0);
    };
    const deliveryCount = async () => {
      const rows = await counted.db
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('instance_id', '=', t.instance.id)
        .execute();
      return rows.length;
    };
    const rowsOf = async (id: string) =>
      counted.db
        .selectFrom('messages')
        .select(['id', 'content', 'state'])
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', id)
        .execute();

    it('a copy in a later batch: one message row, one Message event, one delivery; the sequence does not move', async () => {
      const first = textMessage('hello', { phone: '5511911113001' });
      await t.services.recorder.record(t.instance.id, first);
      const sequence = await lastSequence();
      const queued = await deliveryCount();
      const peer = await counted.db
        .selectFrom('chat_peers')
        .select(['last_at', 'push_name'])
        .where('instance_id', '=', t.instance.id)
        .where('jid', '=', '5511911113001@s.whatsapp.net')
        .executeTakeFirstOrThrow();

      // Offline redelivery after a reconnect whose acknowledgement was lost: the same stanza, mapped again, later.
      t.clock.advance(60_000);
      const copy = { ...structuredClone(first), mayRepeat: true as const };
      copy.message.pushName = 'Renamed';
      await t.services.recorder.record(t.instance.id, copy);

      assert.equal((await rowsOf(first.message.id)).length, 1);
      assert.deepEqual(await eventsOf(first.message.id), [['Message', sequence]], 'one Message event');
      assert.equal(await lastSequence(), sequence, 'the copy takes no sequence number');
      assert.equal(await deliveryCount(), queued, 'the copy queues no delivery');
      const after = await counted.db
        .selectFrom('chat_peers')
        .select(['last_at', 'push_name'])
        .where('instance_id', '=', t.instance.id)
        .where('jid', '=', '5511911113001@s.whatsapp.net')
        .executeTakeFirstOrThrow();
      assert.deepEqual(after, peer, 'the copy does not touch the peer');
    });

    it('a message of another chat reusing a stored id is not a copy: it makes its Message event', async () => {
      const first = textMessage('from one chat', { phone: '5511911113011' });
      await t.services.recorder.record(t.instance.id, first);
      const other = textMessage('from another chat', { phone: '5511911113012' });
      other.message.id = first.message.id;
      const sequence = await lastSequence();
      // Delivered offline, so looked up: the stored id is another chat's.
      await t.services.recorder.record(t.instance.id, { ...other, mayRepeat: true });
      assert.deepEqual(
        await eventsOf(first.message.id),
        [
          ['Message', sequence],
          ['Message', sequence + 1],
        ],
        'both chats announce their message',
      );
    });

    it('a copy whose first delivery kept an unresolved LID chat, redelivered with the phone JID a mapping gave since, is a copy', async () => {
      const first = textMessage('first seen under a LID', { phone: '5511911113021' });
      first.message.source = {
        ...first.message.source,
        chat: '88112233445566@lid',
        sender: '88112233445566@lid',
      };
      await t.services.recorder.record(t.instance.id, first);
      const sequence = await lastSequence();
      const copy = { ...structuredClone(first), mayRepeat: true as const };
      copy.message.source = {
        ...copy.message.source,
        chat: '5511911113021@s.whatsapp.net',
        sender: '5511911113021@s.whatsapp.net',
      };
      await t.services.recorder.record(t.instance.id, copy);
      assert.deepEqual(await eventsOf(first.message.id), [['Message', sequence]], 'one Message event');
      assert.equal(await lastSequence(), sequence);
    });

    it('copies within one batch, the same event twice among them: one Message event; the batch looks ids up once', async () => {
      const message = textMessage('twice', { phone: '5511911113002' });
      const other = textMessage('between', { phone: '5511911113002' });
      const before = await lastSequence();
      statements = [];
      counting = true;
      try {
        // One turn: the four are one batch of the recorder.
        await Promise.all(
          [message, other, { ...structuredClone(message), mayRepeat: true as const }, message].map((event) =>
            t.services.recorder.record(t.instance.id, event),
          ),
        );
      } finally {
        counting = false;
      }
      assert.equal(statements.filter((text) => /^select "id", "chat" from "messages"/.test(text)).length, 1);
      assert.equal((await eventsOf(message.message.id)).length, 1);
      assert.deepEqual(
        [...(await eventsOf(message.message.id)), ...(await eventsOf(other.message.id))].map(([type, n]) => [
          type,
          n - before,
        ]),
        [
          ['Message', 1],
          ['Message', 2],
        ],
        'gap-free: the batch numbers its two messages, not the copies',
      );
      assert.equal(await lastSequence(), before + 2);
    });

    it('a copy arriving after retention dropped the first one’s event is still a copy', async () => {
      const first = textMessage('old', { phone: '5511911113003' });
      await t.services.recorder.record(t.instance.id, first);
      // The log's retention dropped the event and its delivery; the message row stays.
      const events = await eventsOf(first.message.id);
      await counted.db
        .deleteFrom('webhook_deliveries')
        .where('instance_id', '=', t.instance.id)
        .where(
          'sequence',
          'in',
          events.map(([, n]) => n),
        )
        .execute();
      await counted.db
        .deleteFrom('webhook_events')
        .where('instance_id', '=', t.instance.id)
        .where(
          'sequence',
          'in',
          events.map(([, n]) => n),
        )
        .execute();
      const sequence = await lastSequence();
      await t.services.recorder.record(t.instance.id, { ...structuredClone(first), mayRepeat: true });
      assert.deepEqual(await eventsOf(first.message.id), []);
      assert.equal(await lastSequence(), sequence);
    });

    it('a receipt, an edit and a reaction about a stored message are not copies', async () => {
      const message = textMessage('original', { phone: '5511911113004' });
      await t.services.recorder.record(t.instance.id, message);
      const { source } = message.message;
      const about: EngineEvent[] = [
        // The account read it on its phone: a receipt of the peer's message, from the account's side.
        {
          type: 'receipt',
          state: 'read',
          messageIds: [message.message.id],
          source: { ...source, isFromMe: true },
          timestamp: t.clock(),
        },
        {
          type: 'messageUpdate',
          update: {
            kind: 'edit',
            messageId: message.message.id,
            source,
            text: 'edited',
            timestamp: t.clock(),
          },
        },
        {
          type: 'message',
          message: {
            id: `${message.message.id}R`,
            source,
            pushName: 'Tester',
            timestamp: t.clock(),
            content: { kind: 'reaction', reaction: { emoji: '👍', targetId: message.message.id } },
          },
        },
      ];
      for (const event of about) await t.services.recorder.record(t.instance.id, event);
      const types = (await eventsOf(message.message.id)).map(([type]) => type);
      // The account's own read makes no ReadReceipt (docs/decisions/0018-webhook-events-and-payloads.md), but it is
      // applied to the row.
      assert.deepEqual(types, ['Message', 'MessageUpdate', 'Message']);
      const [row] = await rowsOf(message.message.id);
      assert.equal(JSON.parse(row?.content ?? '{}').text, 'edited');
      assert.equal(row?.state, 'read');
    });

    it('a send and its copy: the send records its one Message event without a look-up; the copy none', async () => {
      await loginSandbox(t);
      statements = [];
      counting = true;
      let response: Awaited<ReturnType<TestApp['call']>>;
      try {
        response = await t.call('POST', '/v1/messages/send', { phone: '5511999990002', body: 'sent once' });
      } finally {
        counting = false;
      }
      assert.equal(response.status, 200, JSON.stringify(response.body));
      const id: string = response.body.data.id;
      assert.deepEqual(
        statements.filter((text) => /^select "id", "chat" from "messages"/.test(text)),
        [],
        'a send a request waits for is its first record: no look-up on the send path',
      );
      const [sent] = await counted.db
        .selectFrom('messages')
        .selectAll()
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', id)
        .execute();
      assert.ok(sent);
      assert.deepEqual(
        (await eventsOf(id)).filter(([type]) => type === 'Message').length,
        1,
        'the send made its Message event',
      );
      const sequence = await lastSequence();
      // The platform hands the account's own message back (another device's sync of it, a redelivery).
      const echo: EngineEvent = {
        type: 'message',
        mayRepeat: true,
        message: {
          id,
          source: { chat: sent.chat, sender: sent.sender, isFromMe: true, isGroup: false },
          pushName: '',
          timestamp: Number(sent.timestamp),
          content: JSON.parse(sent.content),
        },
      };
      await t.services.recorder.record(t.instance.id, echo);
      assert.equal(
        (await eventsOf(id)).filter(([type]) => type === 'Message').length,
        1,
        'no second Message event',
      );
      assert.equal(await lastSequence(), sequence);
    });

    it('a queued send records its one Message event without a look-up either: its relay is its first record', async () => {
      // Logged in by the test before.
      statements = [];
      counting = true;
      let id: string;
      try {
        const response = await t.call(
          'POST',
          '/v1/messages/send',
          { phone: '5511999990003', body: 'queued once' },
          { prefer: 'respond-async' },
        );
        assert.equal(response.status, 202, JSON.stringify(response.body));
        id = response.body.data.id;
        await eventually('the queued send relayed', async () => {
          const row = await counted.db
            .selectFrom('send_jobs')
            .select('status')
            .where('instance_id', '=', t.instance.id)
            .where('id', '=', id)
            .executeTakeFirst();
          return row?.status === 'sent';
        });
      } finally {
        counting = false;
      }
      assert.deepEqual(
        statements.filter((text) => /^select "id", "chat" from "messages"/.test(text)),
        [],
        'a send this process relays is its first record',
      );
      assert.equal((await eventsOf(id)).filter(([type]) => type === 'Message').length, 1);
    });
  });
}
