import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EngineEvent, MessageSource } from '../../src/domain/messages.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import type { TestApp } from '../support/app.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from '../webhooks/support.ts';

/**
 * Edits, deletions and poll votes the platform hands over again (docs/decisions/0024-engines-and-data-flow.md: a
 * message handed over again is recorded once): an update event carrying the id of the platform message it came in
 * (`platformId`) is recorded once, however often it comes (src/events/message-copies.ts); its id is kept with it, in
 * the same transaction (`recorded_updates`). And an edit or deletion its message may not take
 * (src/domain/messages.ts `updateMayChange`: not its sender's, in a group not an admin's) is decided where it is
 * recorded: it changes nothing and makes no webhook event (docs/decisions/0026-chats-edits-polls-and-calls.md).
 * Before, a repeated edit or vote made a second webhook event, and the recorder announced any edit it was given.
 */
for (const dialect of testDialects()) {
  describe(`an update the platform hands over again is recorded once [${dialect}]`, () => {
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
      await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
    });
    after(async () => {
      await t.close();
      await counted.destroy();
      await testStore.cleanup();
    });

    /** The instance's webhook events naming `id` in their body, as [type, sequence]. */
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
    const contentOf = async (id: string) => {
      const row = await counted.db
        .selectFrom('messages')
        .select('content')
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      return JSON.parse(row.content);
    };
    const record = (event: EngineEvent) => t.services.recorder.record(t.instance.id, event);
    const edit = (
      messageId: string,
      source: MessageSource,
      text: string,
      platformId?: string,
    ): EngineEvent => ({
      type: 'messageUpdate',
      update: { kind: 'edit', messageId, source, text, timestamp: t.clock() },
      ...(platformId === undefined ? {} : { platformId }),
    });

    it('an edit and a vote come again in a later batch: one event each, the edit applied once', async () => {
      const message = textMessage('at 5?', { phone: '5511911114001' });
      await record(message);
      const { source } = message.message;
      const first = edit(message.message.id, source, 'at 6?', '3EB0EDIT4001');
      await record(first);
      const editedAt = (await contentOf(message.message.id)).editedAt;
      const vote = (): EngineEvent => ({
        type: 'pollVote',
        platformId: '3EB0VOTE4001',
        vote: {
          pollId: '3EB0POLL4001',
          pollName: 'Q?',
          source,
          selectedOptions: ['B'],
          timestamp: t.clock(),
        },
      });
      await record(vote());
      const sequence = await lastSequence();
      // Handed over again after a reconnect: the same stanzas, mapped again, later.
      t.clock.advance(60_000);
      await record(edit(message.message.id, source, 'at 6?', '3EB0EDIT4001'));
      await record(vote());

      assert.deepEqual(
        (await eventsOf(message.message.id)).map(([type]) => type),
        ['Message', 'MessageUpdate'],
        'one MessageUpdate',
      );
      assert.deepEqual(
        (await eventsOf('3EB0POLL4001')).map(([type]) => type),
        ['PollVote'],
        'one PollVote',
      );
      assert.equal(await lastSequence(), sequence, 'the copies take no sequence number');
      assert.equal((await contentOf(message.message.id)).editedAt, editedAt, 'the copy does not edit again');
      const stored = await counted.db
        .selectFrom('recorded_updates')
        .select('id')
        .where('instance_id', '=', t.instance.id)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        stored.map((row) => row.id),
        ['3EB0EDIT4001', '3EB0VOTE4001'],
        'the ids are kept with the updates',
      );
    });

    it('the same update twice in one batch: one event; the batch looks its ids up once', async () => {
      const message = textMessage('pin 1', { phone: '5511911114002' });
      await record(message);
      const { source } = message.message;
      const before = await lastSequence();
      statements = [];
      counting = true;
      try {
        // One turn: the three are one batch of the recorder.
        await Promise.all(
          [
            edit(message.message.id, source, 'pin 2', '3EB0EDIT4002'),
            textMessage('between', { phone: '5511911114002' }),
            edit(message.message.id, source, 'pin 2', '3EB0EDIT4002'),
          ].map(record),
        );
      } finally {
        counting = false;
      }
      assert.equal(statements.filter((text) => /from "recorded_updates"/.test(text)).length, 1);
      assert.deepEqual(
        (await eventsOf(message.message.id)).map(([type]) => type),
        ['Message', 'MessageUpdate'],
      );
      assert.equal(await lastSequence(), before + 2, 'the edit and the message between: gap-free');
    });

    it('updates with no platform id (the account’s own through the API, the sandbox’s) cost no look-up', async () => {
      const message = textMessage('mine', { phone: '5511911114003', fromMe: true });
      await record(message);
      statements = [];
      counting = true;
      try {
        await record(edit(message.message.id, message.message.source, 'mine, edited'));
        await record(edit(message.message.id, message.message.source, 'mine, edited again'));
      } finally {
        counting = false;
      }
      assert.deepEqual(
        statements.filter((text) => /recorded_updates/.test(text)),
        [],
        'neither looked up nor kept',
      );
      assert.deepEqual(
        (await eventsOf(message.message.id)).map(([type]) => type),
        ['Message', 'MessageUpdate', 'MessageUpdate'],
      );
    });

    it('an edit by someone who did not send the message: nothing changes, no webhook event', async () => {
      const message = textMessage('my order is 42', { phone: '5511911114004' });
      await record(message);
      const sequence = await lastSequence();
      const bia = '5511911114005@s.whatsapp.net';
      await record(
        edit(message.message.id, { ...message.message.source, sender: bia }, 'order 0', '3EB0FORGE4004'),
      );
      assert.equal((await contentOf(message.message.id)).text, 'my order is 42');
      assert.deepEqual(
        (await eventsOf(message.message.id)).map(([type]) => type),
        ['Message'],
      );
      assert.equal(await lastSequence(), sequence);
    });

    it('in a group, a deletion of another member’s message: only an admin’s (byAdmin) deletes it', async () => {
      const group = '120363000000004006@g.us';
      const ana = '5511911114006@s.whatsapp.net';
      const bia = '5511911114007@s.whatsapp.net';
      const said = (text: string) => {
        const message = textMessage(text, { phone: '5511911114006' });
        message.message.source = { chat: group, sender: ana, isFromMe: false, isGroup: true };
        return message;
      };
      const deletion = (messageId: string, byAdmin: boolean, platformId: string): EngineEvent => ({
        type: 'messageUpdate',
        platformId,
        update: {
          kind: 'delete',
          messageId,
          source: { chat: group, sender: bia, isFromMe: false, isGroup: true },
          timestamp: t.clock(),
          ...(byAdmin ? { byAdmin: true as const } : {}),
        },
      });
      const first = said('order 42');
      const second = said('order 43');
      await record(first);
      await record(second);
      await record(deletion(first.message.id, false, '3EB0DEL4006'));
      await record(deletion(second.message.id, true, '3EB0DEL4007'));
      assert.equal((await contentOf(first.message.id)).deletedAt, undefined, 'a plain member deleted it');
      assert.equal((await contentOf(first.message.id)).text, 'order 42');
      assert.deepEqual(
        (await eventsOf(first.message.id)).map(([type]) => type),
        ['Message'],
      );
      assert.ok((await contentOf(second.message.id)).deletedAt, 'the admin’s deletion');
      assert.deepEqual(
        (await eventsOf(second.message.id)).map(([type]) => type),
        ['Message', 'MessageUpdate'],
      );
    });

    it('in a group, an unverified deletion of another member’s message: kept, reported as unverified', async () => {
      // The engine could not read whether the deleter is an admin (docs/decisions/0106-unverified-group-deletions.md).
      // Before, it marked such a deletion an admin's and the store deleted the message.
      const group = '120363000000004106@g.us';
      const ana = '5511911114106@s.whatsapp.net';
      const bia = '5511911114107@s.whatsapp.net';
      const message = textMessage('order 44', { phone: '5511911114106' });
      message.message.source = { chat: group, sender: ana, isFromMe: false, isGroup: true };
      const deletion = (sender: string, platformId: string): EngineEvent => ({
        type: 'messageUpdate',
        platformId,
        update: {
          kind: 'delete',
          messageId: message.message.id,
          source: { chat: group, sender, isFromMe: false, isGroup: true },
          timestamp: t.clock(),
          unverified: true,
        },
      });
      await record(message);
      await record(deletion(bia, '3EB0DEL4106'));
      const kept = await contentOf(message.message.id);
      assert.equal(kept.deletedAt, undefined, 'an unverified deletion deleted another member’s message');
      assert.equal(kept.text, 'order 44');
      const payloads = async () =>
        (
          await counted.db
            .selectFrom('webhook_events')
            .select(['type', 'payload'])
            .where('instance_id', '=', t.instance.id)
            .where('type', '=', 'MessageUpdate')
            .execute()
        )
          .map((row) => JSON.parse(row.payload))
          .filter((payload) => payload.event.messageId === message.message.id);
      const [reported, ...more] = await payloads();
      assert.deepEqual(more, []);
      assert.equal(reported?.event.kind, 'delete');
      assert.equal(reported?.event.unverified, true);
      assert.equal(reported?.event.messageSource.sender, bia);
      // Handed over again: once. The sender's own deletion later still deletes it, reported without the mark.
      await record(deletion(bia, '3EB0DEL4106'));
      assert.equal((await payloads()).length, 1);
      await record({
        type: 'messageUpdate',
        platformId: '3EB0DEL4108',
        update: {
          kind: 'delete',
          messageId: message.message.id,
          source: { chat: group, sender: ana, isFromMe: false, isGroup: true },
          timestamp: t.clock(),
        },
      });
      assert.ok((await contentOf(message.message.id)).deletedAt, 'the sender’s own deletion');
      const [, own] = await payloads();
      assert.equal(own?.event.unverified, undefined);
      // A message deleted already: an unverified deletion of it is refused as any other (no event).
      await record(deletion(bia, '3EB0DEL4109'));
      assert.equal((await payloads()).length, 2);
    });
  });
}
