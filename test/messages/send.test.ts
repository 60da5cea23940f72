import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, messageRow, OWN, OWN_ID, PEER, RFC3339, UNREGISTERED } from './support.ts';

const PHONE_RULE = 'phone must be digits only, international format, no leading +';

for (const dialect of testDialects()) {
  describe(`POST /v1/messages/send and the send pipeline (docs/api.md#messages, docs/decisions/0002-instance-resolution.md, docs/decisions/0001-envelope-and-error-codes.md, docs/decisions/0017-messages-and-media.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 409 before login and while disconnected, before looking at the recipient', async () => {
      const send = () => t.call('POST', '/v1/messages/send', { phone: UNREGISTERED, body: 'hi' });
      assert.deepEqual((await send()).body, bad(409, 'instance is not logged in'));
      await t.call('POST', '/v1/session/connect');
      assert.deepEqual(
        (await send()).body,
        bad(409, 'instance is not logged in'),
        'pairing is not logged in',
      );
      await loginSandbox(t, OWN);
      await t.call('POST', '/v1/session/disconnect');
      assert.deepEqual((await send()).body, bad(409, 'instance is not connected'));
      await t.call('POST', '/v1/session/connect');
    });

    it('sends text: Sent, a 3EB0… id, an RFC 3339 timestamp; the row commits before the response', async () => {
      t.clock.set(Date.parse('2025-03-01T10:00:00.000Z'));
      const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'Hello *world* 👋' });
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.body), ['success', 'code', 'data']);
      assert.equal(res.body.success, true);
      assert.equal(res.body.code, 200);
      assert.deepEqual(Object.keys(res.body.data).sort(), ['details', 'id', 'timestamp']);
      assert.equal(res.body.data.details, 'Sent');
      assert.match(res.body.data.id, OWN_ID);
      assert.match(res.body.data.timestamp, RFC3339);
      assert.equal(res.body.data.timestamp, '2025-03-01T10:00:00.000Z');
      const row = await messageRow(t, res.body.data.id);
      assert.ok(row, 'stored before the response');
      assert.deepEqual(
        { ...row, content: JSON.parse(row.content) },
        {
          instance_id: t.instance.id,
          id: res.body.data.id,
          chat: `${PEER}@s.whatsapp.net`,
          sender: `${OWN}@s.whatsapp.net`,
          from_me: 1,
          is_group: 0,
          type: 'text',
          content: { kind: 'text', text: 'Hello *world* 👋' },
          push_name: `Sandbox ${OWN.slice(-4)}`,
          timestamp: Date.parse('2025-03-01T10:00:00.000Z'),
          state: 'sent',
          state_at: Date.parse('2025-03-01T10:00:00.000Z'),
          created_at: Date.parse('2025-03-01T10:00:00.000Z'),
        },
      );
    });

    it('gives every send a new id', async () => {
      const ids = new Set<string>();
      for (let i = 0; i < 5; i++) {
        ids.add((await t.call('POST', '/v1/messages/send', { phone: PEER, body: `n${i}` })).body.data.id);
      }
      assert.equal(ids.size, 5);
    });

    it('quotes a reply with id and stores the quoted id', async () => {
      const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'question' });
      const reply = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: 'answer',
        id: first.body.data.id,
        linkPreview: true,
      });
      assert.equal(reply.status, 200);
      const row = await messageRow(t, reply.body.data.id);
      assert.deepEqual(JSON.parse(row?.content ?? '{}'), {
        kind: 'text',
        text: 'answer',
        quotedId: first.body.data.id,
      });
    });

    it('refuses a reply quoting a message of another chat (400 naming id), sync or queued; an id never stored and the chat by LID pass', async () => {
      const other = '5511999990003';
      const secret = await t.call('POST', '/v1/sandbox/inbound', {
        phone: other,
        body: 'my card PIN is 1234',
      });
      assert.equal(secret.status, 200, JSON.stringify(secret.body));
      const quoting = { body: 'ok', id: secret.body.data.id };
      const refused = bad(400, 'id must name a message in this chat');
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send', { phone: PEER, ...quoting })).body,
        refused,
      );
      const queued = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: PEER, ...quoting },
        { prefer: 'respond-async' },
      );
      assert.deepEqual(queued.body, refused, 'refused before the job is stored');
      const group = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Team',
        ownerPhone: PEER,
        participants: [],
      });
      assert.equal(group.status, 200, JSON.stringify(group.body));
      const inGroup = await t.call('POST', '/v1/messages/send', { phone: group.body.data.jid, ...quoting });
      assert.deepEqual(inGroup.body, refused, 'a 1:1 message is not quoted into a group');
      const jobs = await t.services.store.db
        .selectFrom('send_jobs')
        .select('id')
        .where('instance_id', '=', t.instance.id)
        .where('payload', 'like', `%${secret.body.data.id}%`)
        .execute();
      assert.deepEqual(jobs, [], 'no job of a refused reply');
      // The engine refuses it too (a job stored before the check, relayed now), as the live engine does.
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      await assert.rejects(
        session.send({
          to: `${PEER}@s.whatsapp.net`,
          content: { kind: 'text', text: 'ok', linkPreview: false },
          quotedId: secret.body.data.id,
        }),
        { code: 'invalid', message: 'id must name a message in this chat' },
      );

      const own = await t.call('POST', '/v1/messages/send', { phone: other, ...quoting });
      assert.equal(own.status, 200, 'in its own chat');
      assert.equal(JSON.parse((await messageRow(t, own.body.data.id))?.content ?? '{}').quotedId, quoting.id);
      const unknown = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: 'ok',
        id: '3A00NEVERSTORED',
      });
      assert.equal(unknown.status, 200, 'an id parley never stored is sent as the id alone');
      // The sandbox's LID of a number: its length in two digits, then its digits reversed
      // (docs/decisions/0038-lid-mappings.md).
      const lid = `13${[...other].reverse().join('')}@lid`;
      const byLid = await t.call('POST', '/v1/messages/send', { phone: lid, ...quoting });
      assert.equal(byLid.status, 200, `the chat named by its LID: ${JSON.stringify(byLid.body)}`);
    });

    it('answers 422 for an unregistered recipient (numbers ending in 0000, docs/decisions/0004-sandbox.md)', async () => {
      const res = await t.call('POST', '/v1/messages/send', { phone: UNREGISTERED, body: 'hi' });
      assert.deepEqual(res.body, bad(422, `recipient ${UNREGISTERED} is not registered on the platform`));
    });

    it('caches registration answers and forgets one when the sandbox redefines the user', async () => {
      const phone = '5511999990777';
      assert.equal((await t.call('POST', '/v1/messages/send', { phone, body: 'a' })).status, 200);
      assert.equal((await t.call('POST', '/v1/sandbox/users', { phone, registered: false })).status, 200);
      const res = await t.call('POST', '/v1/messages/send', { phone, body: 'b' });
      assert.deepEqual(res.body, bad(422, `recipient ${phone} is not registered on the platform`));
      let lookups = 0;
      const check = (phones: string[]) => {
        lookups += 1;
        return Promise.resolve(
          phones.map((q) => ({ query: q, isInPlatform: true, jid: null, verifiedName: '' })),
        );
      };
      await t.services.registrations.check('x', ['5511999990778'], check);
      await t.services.registrations.check('x', ['5511999990778'], check);
      assert.equal(lookups, 1, 'the second check is answered from the cache');
    });

    it('validates the body: required fields, phone format, body length (65,536)', async () => {
      const send = (body: unknown) => t.call('POST', '/v1/messages/send', body);
      assert.deepEqual((await send({ body: 'x' })).body, bad(400, 'phone is required'));
      assert.deepEqual((await send(undefined)).body, bad(400, 'phone is required'));
      assert.deepEqual((await send({ phone: PEER })).body, bad(400, 'body is required'));
      assert.deepEqual((await send({ phone: PEER, body: '' })).body, bad(400, 'body must not be empty'));
      assert.deepEqual((await send({ phone: PEER, body: 5 })).body, bad(400, 'body must be a string'));
      for (const phone of ['+5511999990002', '1234567', '1234567890123456', '55 11 9999', 'abc', 7]) {
        assert.deepEqual((await send({ phone, body: 'x' })).body, bad(400, PHONE_RULE), String(phone));
      }
      assert.deepEqual(
        (await send({ phone: PEER, body: 'x', linkPreview: 'yes' })).body,
        bad(400, 'linkPreview must be a boolean'),
      );
      assert.deepEqual(
        (await send({ phone: PEER, body: 'x', id: '' })).body,
        bad(400, 'id must not be empty'),
      );
      const max = 'é'.repeat(65_536);
      const ok = await send({ phone: PEER, body: max });
      assert.equal(ok.status, 200, 'exactly 65,536 characters is allowed');
      assert.deepEqual(
        (await send({ phone: PEER, body: `${max}x` })).body,
        bad(400, 'body must be at most 65536 characters'),
      );
    });

    it('sends to a group the account belongs to; 404 for a group it is not in', async () => {
      const group = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Book club',
        ownerPhone: PEER,
        participants: ['5511999990003'],
      });
      assert.equal(group.status, 200);
      const res = await t.call('POST', '/v1/messages/send', {
        phone: group.body.data.jid,
        body: 'hello group',
      });
      assert.equal(res.status, 200);
      const row = await messageRow(t, res.body.data.id);
      assert.equal(row?.chat, group.body.data.jid);
      assert.equal(row?.is_group, 1);
      const missing = await t.call('POST', '/v1/messages/send', {
        phone: '120363000000000001@g.us',
        body: 'x',
      });
      assert.deepEqual(missing.body, bad(404, 'group not found'));
    });

    it('needs chat:messages (docs/decisions/0003-scopes-and-keys.md)', async () => {
      const key = await t.newKey({ scopes: ['chat:session'] });
      const res = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: PEER, body: 'x' },
        {
          authorization: `Bearer ${key}`,
        },
      );
      assert.deepEqual(res.body, bad(403, 'API key lacks required scope chat:messages'));
    });
  });

  describe(`from and the default instance (docs/decisions/0002-instance-resolution.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('sends from the most recently connected instance without from; from takes the UUID or the phone', async () => {
      const second = await t.newInstance('test', 'second');
      await loginSandbox(t, OWN);
      t.clock.advance(1000);
      await loginSandbox(t, '5511999990009', second.id);
      const sender = async (body: Record<string, unknown>) => {
        const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'x', ...body });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const rows = await t.services.store.db
          .selectFrom('messages')
          .select('instance_id')
          .where('id', '=', res.body.data.id)
          .execute();
        return rows.map((r) => r.instance_id);
      };
      assert.deepEqual(await sender({}), [second.id], 'the most recently connected instance');
      assert.deepEqual(await sender({ from: t.instance.id }), [t.instance.id]);
      assert.deepEqual(await sender({ from: OWN }), [t.instance.id], 'the linked phone');
      assert.deepEqual(await sender({ from: '5511999990009' }), [second.id]);
      t.clock.advance(1000);
      await t.call('POST', `/v1/session/connect?from=${t.instance.id}`);
      await t.call('POST', `/v1/session/disconnect?from=${t.instance.id}`);
      await t.call('POST', `/v1/session/connect?from=${t.instance.id}`);
      assert.deepEqual(await sender({}), [t.instance.id], 'reconnecting makes it the most recent');
      const unknown = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: 'x',
        from: '5511999998888',
      });
      assert.deepEqual(unknown.body, bad(404, 'instance not found'));
      const other = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: 'x',
        from: '00000000-0000-4000-8000-000000000000',
      });
      assert.deepEqual(other.body, bad(404, 'instance not found'));
    });
  });
}
