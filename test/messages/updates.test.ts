import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, messageRow, OWN, PEER } from './support.ts';

const PEER_JID = `${PEER}@s.whatsapp.net`;
const OWN_JID = `${OWN}@s.whatsapp.net`;
const THIRD = '5511977776666';

/** The payloads of the instance's recorded webhook events of `type`, in sequence order. */
async function payloads(t: TestApp, type: string): Promise<Record<string, unknown>[]> {
  const rows = await t.services.store.db
    .selectFrom('webhook_events')
    .select(['payload'])
    .where('instance_id', '=', t.instance.id)
    .where('type', '=', type)
    .orderBy('sequence')
    .execute();
  return rows.map((row) => JSON.parse(row.payload) as Record<string, unknown>);
}

const iso = (t: TestApp) => new Date(t.clock()).toISOString();

for (const dialect of testDialects()) {
  describe(`edit, delete, polls, mentions, chat presence on the sandbox [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 409 before login', async () => {
      const edit = await t.call('POST', '/v1/messages/edit', { phone: PEER, id: '3EB0AA', body: 'x' });
      assert.deepEqual(edit.body, bad(409, 'instance is not logged in'));
      const presence = await t.call('POST', '/v1/chats/presence', { phone: PEER, state: 'composing' });
      assert.deepEqual(presence.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
    });

    it('edits an own text message: Edited, the stored text changes, a MessageUpdate event is recorded', async () => {
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'see you at 5' });
      const id = sent.body.data.id as string;
      t.clock.advance(60_000);
      const res = await t.call('POST', '/v1/messages/edit', { phone: PEER, id, body: 'see you at 6' });
      assert.deepEqual(res.body, {
        success: true,
        code: 200,
        data: { details: 'Edited', id, timestamp: iso(t) },
      });
      const row = await messageRow(t, id);
      assert.deepEqual(JSON.parse(row?.content ?? '{}'), {
        kind: 'text',
        text: 'see you at 6',
        editedAt: t.clock(),
      });
      const [event] = (await payloads(t, 'MessageUpdate')).slice(-1);
      assert.deepEqual(event?.event, {
        kind: 'edit',
        messageId: id,
        messageSource: { chat: PEER_JID, sender: OWN_JID, isFromMe: true, isGroup: false },
        text: 'see you at 6',
        timestamp: iso(t),
      });
      // The stored message as GET /v1/messages/{id} shows it: the new text and when it was edited.
      const read = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(read.status, 200);
      assert.deepEqual(
        [read.body.data.message, read.body.data.editedAt, read.body.data.deletedAt],
        [{ conversation: 'see you at 6' }, iso(t), undefined],
      );
    });

    it('refuses edits past 15 minutes, of non-text messages, of others’ messages, of unknown ids', async () => {
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'old' });
      const id = sent.body.data.id as string;
      t.clock.advance(15 * 60_000 + 1);
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/edit', { phone: PEER, id, body: 'new' })).body,
        bad(409, 'messages can be edited only within 15 minutes of sending'),
      );
      const pin = await t.call('POST', '/v1/messages/send/location', {
        phone: PEER,
        latitude: 1,
        longitude: 2,
      });
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/edit', { phone: PEER, id: pin.body.data.id, body: 'x' })).body,
        bad(400, 'only text messages can be edited'),
      );
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'hello' });
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/edit', { phone: PEER, id: inbound.body.data.id, body: 'x' }))
          .body,
        bad(403, 'only messages this instance sent can be edited'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/edit', { phone: THIRD, id, body: 'x' })).body,
        bad(404, `message ${id} not found in this chat`),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/edit', { phone: PEER, id })).body,
        bad(400, 'body is required'),
      );
    });

    it('deletes an own message for everyone within 48 hours; twice is a conflict; others’ messages are refused', async () => {
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'oops' });
      const id = sent.body.data.id as string;
      t.clock.advance(47 * 3_600_000);
      const res = await t.call('POST', '/v1/messages/delete', { phone: PEER, id });
      assert.deepEqual(res.body, {
        success: true,
        code: 200,
        data: { details: 'Deleted', id, timestamp: iso(t) },
      });
      assert.deepEqual(JSON.parse((await messageRow(t, id))?.content ?? '{}'), {
        kind: 'text',
        deletedAt: t.clock(),
      });
      const read = await t.call('GET', `/v1/messages/${id}`);
      assert.deepEqual([read.body.data.message, read.body.data.deletedAt], [{ conversation: '' }, iso(t)]);
      const [event] = (await payloads(t, 'MessageUpdate')).slice(-1);
      assert.deepEqual(event?.event, {
        kind: 'delete',
        messageId: id,
        messageSource: { chat: PEER_JID, sender: OWN_JID, isFromMe: true, isGroup: false },
        timestamp: iso(t),
      });
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/delete', { phone: PEER, id })).body,
        bad(409, `message ${id} was already deleted`),
      );
      const late = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'late' });
      t.clock.advance(48 * 3_600_000 + 1);
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/delete', { phone: PEER, id: late.body.data.id })).body,
        bad(409, 'messages can be deleted for everyone only within 48 hours of sending'),
      );
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'mine' });
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/delete', { phone: PEER, id: inbound.body.data.id })).body,
        bad(403, 'only messages this instance sent can be deleted for everyone'),
      );
    });

    it('a simulated user edits and deletes their message: MessageUpdate events with the sender', async () => {
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'at 5?' });
      const id = inbound.body.data.id as string;
      t.clock.advance(1000);
      const edit = await t.call('POST', '/v1/sandbox/edit', { phone: PEER, id, body: 'at 6?' });
      assert.deepEqual(edit.body, { success: true, code: 200, data: { details: `Message ${id} edited` } });
      const source = { chat: PEER_JID, sender: PEER_JID, isFromMe: false, isGroup: false };
      let [event] = (await payloads(t, 'MessageUpdate')).slice(-1);
      assert.deepEqual(event?.event, {
        kind: 'edit',
        messageId: id,
        messageSource: source,
        text: 'at 6?',
        timestamp: iso(t),
      });
      assert.equal(JSON.parse((await messageRow(t, id))?.content ?? '{}').text, 'at 6?');
      t.clock.advance(1000);
      const del = await t.call('POST', '/v1/sandbox/delete', { phone: PEER, id });
      assert.equal(del.status, 200);
      [event] = (await payloads(t, 'MessageUpdate')).slice(-1);
      assert.deepEqual(event?.event, {
        kind: 'delete',
        messageId: id,
        messageSource: source,
        timestamp: iso(t),
      });
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/edit', { phone: THIRD, id, body: 'x' })).body,
        bad(400, `message ${id} was not sent by ${THIRD}`),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/delete', { phone: PEER, id: 'NOPE' })).body,
        bad(404, 'message not found'),
      );
    });

    it('sends a poll (stored, Message payload with pollCreationMessage) and validates its options', async () => {
      const res = await t.call('POST', '/v1/messages/send/poll', {
        phone: PEER,
        name: 'Which day?',
        options: ['Mon', 'Tue', 'Fri'],
        selectableCount: 2,
      });
      assert.equal(res.status, 200);
      assert.equal(res.body.data.details, 'Sent');
      const id = res.body.data.id as string;
      assert.deepEqual(JSON.parse((await messageRow(t, id))?.content ?? '{}'), {
        kind: 'poll',
        text: 'Which day?',
        poll: { options: ['Mon', 'Tue', 'Fri'], selectableCount: 2 },
      });
      assert.equal((await messageRow(t, id))?.type, 'poll');
      const [message] = (await payloads(t, 'Message')).slice(-1);
      assert.deepEqual((message?.event as { message: unknown } | undefined)?.message, {
        conversation: 'Which day?',
        pollCreationMessage: {
          name: 'Which day?',
          options: [{ optionName: 'Mon' }, { optionName: 'Tue' }, { optionName: 'Fri' }],
          selectableOptionsCount: 2,
        },
      });
      const poll = (body: Record<string, unknown>) =>
        t.call('POST', '/v1/messages/send/poll', { phone: PEER, name: 'Q', ...body });
      assert.deepEqual((await poll({ options: ['a'] })).body, bad(400, 'options must have at least 2 items'));
      assert.deepEqual(
        (await poll({ options: Array.from({ length: 13 }, (_, i) => `o${i}`) })).body,
        bad(400, 'options must have at most 12 items'),
      );
      assert.deepEqual(
        (await poll({ options: ['a', 'a'] })).body,
        bad(400, 'options must be unique (a appears twice)'),
      );
      assert.deepEqual((await poll({ options: ['a', ' '] })).body, bad(400, 'options must not be blank'));
      assert.deepEqual(
        (await poll({ options: ['a', 'b'], selectableCount: 3 })).body,
        bad(400, 'selectableCount must be 0 (any) or 1 to 2 (the number of options)'),
      );
      assert.deepEqual((await poll({ options: ['a', ''] })).body.error.code, 400);
      // A blank question is refused as a blank option is: the poll would show no question.
      assert.deepEqual(
        (await poll({ name: ' \t ', options: ['a', 'b'] })).body,
        bad(400, 'name must not be blank'),
      );
    });

    it('a simulated user votes: PollVote events with the voter and the option names; bad votes refused', async () => {
      const sent = await t.call('POST', '/v1/messages/send/poll', {
        phone: PEER,
        name: 'Pizza?',
        options: ['Yes', 'No'],
        selectableCount: 1,
      });
      const id = sent.body.data.id as string;
      t.clock.advance(2000);
      const vote = await t.call('POST', '/v1/sandbox/vote', { phone: PEER, id, options: ['No'] });
      assert.deepEqual(vote.body, { success: true, code: 200, data: { details: `Vote on ${id} delivered` } });
      const [event] = await payloads(t, 'PollVote');
      assert.deepEqual(event?.event, {
        pollId: id,
        pollName: 'Pizza?',
        messageSource: { chat: PEER_JID, sender: PEER_JID, isFromMe: false, isGroup: false },
        selectedOptions: ['No'],
        timestamp: iso(t),
      });
      const voteBad = (body: Record<string, unknown>) =>
        t.call('POST', '/v1/sandbox/vote', { phone: PEER, id, ...body });
      assert.deepEqual(
        (await voteBad({ options: ['Maybe'] })).body,
        bad(400, 'options: "Maybe" is not an option of the poll'),
      );
      assert.deepEqual(
        (await voteBad({ options: ['Yes', 'No'] })).body,
        bad(400, 'options must have at most 1 item(s): the poll allows 1'),
      );
      assert.deepEqual((await voteBad({ id: 'NOPE', options: [] })).body, bad(404, 'poll not found'));
      assert.deepEqual(
        (await voteBad({ phone: THIRD, options: ['Yes'] })).body,
        bad(422, `phone ${THIRD} is not in the chat of the poll`),
      );
    });

    it('mentions on text and captions: stored, contextInfo.mentionedJid; each must be written @phone', async () => {
      const res = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: `ask @${THIRD} about it`,
        mentions: [THIRD],
      });
      assert.equal(res.status, 200);
      const row = await messageRow(t, res.body.data.id);
      assert.deepEqual(JSON.parse(row?.content ?? '{}'), {
        kind: 'text',
        text: `ask @${THIRD} about it`,
        mentions: [`${THIRD}@s.whatsapp.net`],
      });
      const [message] = (await payloads(t, 'Message')).slice(-1);
      assert.deepEqual(
        (message?.event as { message: { contextInfo: unknown } } | undefined)?.message.contextInfo,
        {
          mentionedJid: [`${THIRD}@s.whatsapp.net`],
        },
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'hi all', mentions: [THIRD] })).body,
        bad(400, `mentions: ${THIRD} must appear in body as @${THIRD}`),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send', { phone: PEER, body: `@${THIRD}1`, mentions: [THIRD] }))
          .body,
        bad(400, `mentions: ${THIRD} must appear in body as @${THIRD}`),
      );
      assert.deepEqual(
        (
          await t.call('POST', '/v1/messages/send', {
            phone: PEER,
            body: `@${THIRD}`,
            mentions: [THIRD, THIRD],
          })
        ).body,
        bad(400, 'mentions must be unique'),
      );
      const png =
        'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
      const image = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: png,
        caption: `for @${THIRD}`,
        mentions: [THIRD],
      });
      assert.equal(image.status, 200);
      assert.deepEqual(JSON.parse((await messageRow(t, image.body.data.id))?.content ?? '{}').mentions, [
        `${THIRD}@s.whatsapp.net`,
      ]);
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: png, mentions: [THIRD] }))
          .body,
        bad(400, `mentions: ${THIRD} must appear in caption as @${THIRD}`),
      );
    });

    it('chat presence: every state accepted; bad state, unregistered chat refused', async () => {
      for (const state of ['composing', 'recording', 'paused', 'available', 'unavailable']) {
        const res = await t.call('POST', '/v1/chats/presence', { phone: PEER, state });
        assert.deepEqual(res.body, { success: true, code: 200, data: { details: `Presence ${state} sent` } });
      }
      assert.deepEqual(
        (await t.call('POST', '/v1/chats/presence', { phone: PEER, state: 'typing' })).body,
        bad(400, 'state must be one of composing, recording, paused, available, unavailable'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/chats/presence', { phone: '5511999990000', state: 'composing' })).body,
        bad(422, 'recipient 5511999990000 is not registered on the platform'),
      );
    });

    it('gateway twins: /chat/send/poll, /chat/send/edit, /chat/delete, /chat/presence', async () => {
      const gw = (path: string, body: unknown) =>
        t.call('POST', path, body, { 'x-instance-id': t.instance.id });
      const poll = await gw('/chat/send/poll', { phone: PEER, name: 'Q', options: ['a', 'b'] });
      assert.equal(poll.body.data.details, 'Sent');
      assert.equal((await messageRow(t, poll.body.data.id))?.type, 'poll');
      const sent = await gw('/chat/send/text', { phone: PEER, message: 'typo' });
      const id = sent.body.data.id as string;
      const edit = await gw('/chat/send/edit', { phone: PEER, id, body: 'fixed' });
      assert.deepEqual(edit.body.data, { details: 'Edited', id, timestamp: iso(t) });
      const del = await gw('/chat/delete', { phone: PEER, id });
      assert.equal(del.body.data.details, 'Deleted');
      const presence = await gw('/chat/presence', { phone: PEER, state: 'paused' });
      assert.deepEqual(presence.body, {
        success: true,
        code: 200,
        data: { details: 'Presence paused sent' },
      });
    });

    it('takes the chat:messages scope', async () => {
      const key = await t.newKey({ scopes: ['chat:contacts'] });
      const res = await t.call(
        'POST',
        '/v1/chats/presence',
        { phone: PEER, state: 'composing' },
        { authorization: `Bearer ${key}` },
      );
      assert.deepEqual(res.body, bad(403, 'API key lacks required scope chat:messages'));
    });
  });
}
