import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, messageRow, OWN, OWN_ID, PEER, RFC3339, UNREGISTERED } from './support.ts';

for (const dialect of testDialects()) {
  describe(`reactions and read receipts (docs/api.md#messages) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 409 before login', async () => {
      const react = await t.call('POST', '/v1/messages/react', { phone: PEER, id: 'me:3EB0AA', body: '👍' });
      assert.deepEqual(react.body, bad(409, 'instance is not logged in'));
      const read = await t.call('POST', '/v1/messages/read', { id: ['X'], chatPhone: PEER });
      assert.deepEqual(read.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
    });

    it('reacts to an own message with the me: prefix: Sent, the target id, a timestamp; stored as a reaction', async () => {
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'vote' });
      const target = sent.body.data.id;
      t.clock.advance(5000);
      const res = await t.call('POST', '/v1/messages/react', { phone: PEER, id: `me:${target}`, body: '👍' });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, {
        success: true,
        code: 200,
        data: { details: 'Sent', id: target, timestamp: new Date(t.clock()).toISOString() },
      });
      assert.match(res.body.data.timestamp, RFC3339);
      const reactions = await t.services.store.db
        .selectFrom('messages')
        .selectAll()
        .where('instance_id', '=', t.instance.id)
        .where('type', '=', 'reaction')
        .execute();
      assert.equal(reactions.length, 1);
      const [reaction] = reactions;
      assert.match(reaction?.id ?? '', OWN_ID);
      assert.notEqual(reaction?.id, target, 'the reaction is a message of its own');
      assert.deepEqual(JSON.parse(reaction?.content ?? '{}'), {
        kind: 'reaction',
        reaction: { emoji: '👍', targetId: target },
      });
    });

    it('reacts to a received message (no prefix), removes with an empty body, accepts unknown ids', async () => {
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'like this?' });
      const target = inbound.body.data.id;
      for (const body of ['❤️', '❤', '👍🏽', '🇧🇷', '']) {
        const res = await t.call('POST', '/v1/messages/react', { phone: PEER, id: target, body });
        assert.equal(res.status, 200, `emoji ${JSON.stringify(body)}`);
        assert.equal(res.body.data.id, target);
      }
      const unknown = await t.call('POST', '/v1/messages/react', {
        phone: PEER,
        id: 'ABCDEF0123',
        body: '😀',
      });
      assert.equal(
        unknown.status,
        200,
        'the platform accepts any id (docs/decisions/0001-envelope-and-error-codes.md)',
      );
    });

    it('validates reactions: one emoji, id required, me: needs an id, recipient registered', async () => {
      const react = (body: Record<string, unknown>) => t.call('POST', '/v1/messages/react', body);
      const EMOJI = 'body must be one emoji, or empty to remove the reaction';
      for (const body of ['ok', '👍👍', 'a👍', '1']) {
        assert.deepEqual((await react({ phone: PEER, id: 'X1', body })).body, bad(400, EMOJI), body);
      }
      assert.deepEqual((await react({ phone: PEER, body: '👍' })).body, bad(400, 'id is required'));
      assert.deepEqual((await react({ phone: PEER, id: 'X1' })).body, bad(400, 'body is required'));
      assert.deepEqual((await react({ id: 'X1', body: '👍' })).body, bad(400, 'phone is required'));
      assert.deepEqual(
        (await react({ phone: PEER, id: 'me:', body: '👍' })).body,
        bad(400, 'id must name a message after the me: prefix'),
      );
      assert.deepEqual(
        (await react({ phone: UNREGISTERED, id: 'X1', body: '👍' })).body,
        bad(422, `recipient ${UNREGISTERED} is not registered on the platform`),
      );
    });

    it('marks received messages read: Marked as read, the rows move to read (never backwards)', async () => {
      const a = (await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'one' })).body.data.id;
      const b = (await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'two' })).body.data.id;
      assert.equal((await messageRow(t, a))?.state, 'delivered', 'a received message is stored delivered');
      const res = await t.call('POST', '/v1/messages/read', { id: [a, b, 'NEVER-STORED'], chatPhone: PEER });
      assert.deepEqual(res.body, { success: true, code: 200, data: { details: 'Marked as read' } });
      assert.equal((await messageRow(t, a))?.state, 'read');
      assert.equal((await messageRow(t, b))?.state, 'read');
      const sent = (await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'mine' })).body.data.id;
      await t.call('POST', '/v1/messages/read', { id: [sent], chatPhone: PEER });
      assert.equal((await messageRow(t, sent))?.state, 'sent', 'own messages are not moved by our receipts');
    });

    it('group chats are addressed by their JID and need senderPhone', async () => {
      const group = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Team',
        ownerPhone: PEER,
        participants: [],
      });
      const jid = group.body.data.jid;
      const msg = await t.call('POST', '/v1/sandbox/inbound', {
        phone: PEER,
        body: 'hello team',
        groupJid: jid,
      });
      const noSender = await t.call('POST', '/v1/messages/read', { id: [msg.body.data.id], chatPhone: jid });
      assert.deepEqual(noSender.body, bad(400, 'senderPhone is required for group chats'));
      const ok = await t.call('POST', '/v1/messages/read', {
        id: [msg.body.data.id],
        chatPhone: jid,
        senderPhone: PEER,
      });
      assert.equal(ok.status, 200);
      assert.equal((await messageRow(t, msg.body.data.id))?.state, 'read');
      const react = await t.call('POST', '/v1/messages/react', {
        phone: jid,
        id: msg.body.data.id,
        body: '🎉',
      });
      assert.equal(react.status, 200, 'the sender is looked up in the message store');
    });

    it('validates read: id[] 1..1,000 strings, chatPhone required and well-formed', async () => {
      const read = (body: unknown) => t.call('POST', '/v1/messages/read', body);
      assert.deepEqual((await read({ chatPhone: PEER })).body, bad(400, 'id is required'));
      assert.deepEqual((await read({ id: 'X', chatPhone: PEER })).body, bad(400, 'id must be an array'));
      assert.deepEqual(
        (await read({ id: [], chatPhone: PEER })).body,
        bad(400, 'id must have at least 1 item'),
      );
      const many = Array.from({ length: 1001 }, (_, i) => `ID${i}`);
      assert.deepEqual(
        (await read({ id: many, chatPhone: PEER })).body,
        bad(400, 'id must have at most 1000 items'),
      );
      assert.equal((await read({ id: many.slice(0, 1000), chatPhone: PEER })).status, 200);
      assert.deepEqual((await read({ id: ['X'] })).body, bad(400, 'chatPhone is required'));
      assert.deepEqual(
        (await read({ id: ['X'], chatPhone: '+1' })).body,
        bad(400, 'chatPhone must be digits only, international format, no leading +'),
      );
      assert.deepEqual(
        (await read({ id: ['X'], chatPhone: PEER, senderPhone: 'abc' })).body,
        bad(400, 'senderPhone must be digits only, international format, no leading +'),
      );
      // As a send: an unknown number is refused (the live engine answers alike, test/live/unregistered-chats.test.ts).
      assert.deepEqual(
        (await read({ id: ['X'], chatPhone: UNREGISTERED })).body,
        bad(422, `recipient ${UNREGISTERED} is not registered on the platform`),
      );
    });
  });
}
