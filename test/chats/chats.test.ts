import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, bad, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const BIA = '5511999990003';
const T0 = Date.parse('2026-01-15T12:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();
const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;
const JID_RULE =
  'jid must be a phone number (digits only, international format), a user JID (<phone>@s.whatsapp.net), a group JID (<id>@g.us) or a LID (<digits>@lid)';

for (const dialect of testDialects()) {
  describe(`chats and history (GET /v1/chats, /v1/chats/{jid}/messages, /v1/messages/{id}) [${dialect}]`, () => {
    let t: TestApp;
    let group = '';
    const ids: Record<string, string> = {};
    const ok = (data: unknown) => ({ success: true, code: 200, data });

    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      t.clock.set(T0);
      const inbound = async (name: string, body: Record<string, unknown>) => {
        const res = await t.call('POST', '/v1/sandbox/inbound', body);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        ids[name] = res.body.data.id;
        t.clock.advance(1000);
      };
      await inbound('hi', { phone: PEER, body: 'hi', pushName: 'Ana' });
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'hello Ana' });
      ids.hello = sent.body.data.id;
      t.clock.advance(1000);
      await inbound('yo', { phone: BIA, body: 'yo', pushName: 'Bia' });
      const created = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Team',
        ownerPhone: PEER,
        participants: [BIA],
      });
      group = created.body.data.jid;
      await inbound('team', { phone: BIA, body: 'team news', groupJid: group, pushName: 'Bia' });
      await inbound('there', { phone: PEER, body: 'are you there?', pushName: 'Ana' });
    });
    after(() => t.close());

    it('lists chats by latest activity with their last message and unread count, paged by cursor', async () => {
      const first = await t.call('GET', '/v1/chats?limit=2');
      assert.equal(first.status, 200);
      const cursor = first.body.data.nextCursor;
      assert.equal(typeof cursor, 'string');
      assert.deepEqual(
        first.body,
        ok({
          chats: [
            {
              jid: jidOf(PEER),
              isGroup: false,
              name: 'Ana',
              lastMessage: {
                id: ids.there,
                fromMe: false,
                sender: jidOf(PEER),
                kind: 'text',
                text: 'are you there?',
                timestamp: at(4),
                state: 'delivered',
              },
              unreadCount: 2,
            },
            {
              jid: group,
              isGroup: true,
              name: '',
              lastMessage: {
                id: ids.team,
                fromMe: false,
                sender: jidOf(BIA),
                kind: 'text',
                text: 'team news',
                timestamp: at(3),
                state: 'delivered',
              },
              unreadCount: 1,
            },
          ],
          nextCursor: cursor,
        }),
      );
      const second = await t.call('GET', `/v1/chats?limit=2&cursor=${cursor}`);
      assert.deepEqual(
        second.body,
        ok({
          chats: [
            {
              jid: jidOf(BIA),
              isGroup: false,
              name: 'Bia',
              lastMessage: {
                id: ids.yo,
                fromMe: false,
                sender: jidOf(BIA),
                kind: 'text',
                text: 'yo',
                timestamp: at(2),
                state: 'delivered',
              },
              unreadCount: 1,
            },
          ],
          nextCursor: null,
        }),
      );
      const all = await t.call('GET', '/v1/chats');
      assert.deepEqual(
        all.body.data.chats.map((c: { jid: string }) => c.jid),
        [jidOf(PEER), group, jidOf(BIA)],
      );
      assert.equal(all.body.data.nextCursor, null, 'one page holds all (default limit 50)');
    });

    it('counts unread messages after the newest one marked read, and follows new activity', async () => {
      const unread = async () => {
        const res = await t.call('GET', '/v1/chats');
        return Object.fromEntries(
          res.body.data.chats.map((c: { jid: string; unreadCount: number }) => [c.jid, c.unreadCount]),
        );
      };
      await t.call('POST', '/v1/messages/read', { id: [ids.hi], chatPhone: PEER });
      assert.deepEqual(await unread(), { [jidOf(PEER)]: 1, [group]: 1, [jidOf(BIA)]: 1 });
      await t.call('POST', '/v1/messages/read', { id: [ids.there], chatPhone: PEER });
      assert.deepEqual(await unread(), { [jidOf(PEER)]: 0, [group]: 1, [jidOf(BIA)]: 1 });
      await t.call('POST', '/v1/messages/read', { id: [ids.team], chatPhone: group, senderPhone: BIA });
      assert.deepEqual(await unread(), { [jidOf(PEER)]: 0, [group]: 0, [jidOf(BIA)]: 1 });
      // An own message and a reaction do not count; a new message from Bia moves her chat to the top.
      await t.call('POST', '/v1/messages/send', { phone: BIA, body: 'hey' });
      t.clock.advance(1000);
      const more = await t.call('POST', '/v1/sandbox/inbound', { phone: BIA, body: 'again' });
      t.clock.advance(1000);
      const res = await t.call('GET', '/v1/chats?limit=1');
      assert.equal(res.body.data.chats[0].jid, jidOf(BIA));
      assert.equal(res.body.data.chats[0].lastMessage.id, more.body.data.id);
      assert.equal(res.body.data.chats[0].unreadCount, 2);
      await t.call('POST', '/v1/messages/read', { id: [more.body.data.id], chatPhone: BIA });
      assert.deepEqual(await unread(), { [jidOf(PEER)]: 0, [group]: 0, [jidOf(BIA)]: 0 });
    });

    it("returns a chat's messages newest first, paged, for a phone, a user JID or a group JID", async () => {
      const first = await t.call('GET', `/v1/chats/${PEER}/messages?limit=2`);
      assert.equal(first.status, 200);
      const cursor = first.body.data.nextCursor;
      assert.equal(typeof cursor, 'string');
      assert.deepEqual(first.body.data.messages[0], {
        id: ids.there,
        chat: jidOf(PEER),
        sender: jidOf(PEER),
        fromMe: false,
        isGroup: false,
        pushName: 'Ana',
        timestamp: at(4),
        kind: 'text',
        message: { conversation: 'are you there?' },
        state: 'read',
        stateAt: first.body.data.messages[0].stateAt,
      });
      assert.deepEqual(first.body.data.messages[1], {
        id: ids.hello,
        chat: jidOf(PEER),
        sender: jidOf(OWN),
        fromMe: true,
        isGroup: false,
        pushName: `Sandbox ${OWN.slice(-4)}`,
        timestamp: at(1),
        kind: 'text',
        message: { conversation: 'hello Ana' },
        state: 'sent',
        stateAt: at(1),
      });
      const second = await t.call('GET', `/v1/chats/${PEER}/messages?limit=2&cursor=${cursor}`);
      assert.deepEqual(
        second.body.data.messages.map((m: { id: string }) => m.id),
        [ids.hi],
      );
      assert.equal(second.body.data.nextCursor, null);
      for (const jid of [jidOf(PEER), `${PEER}:3@s.whatsapp.net`]) {
        const res = await t.call('GET', `/v1/chats/${encodeURIComponent(jid)}/messages`);
        assert.deepEqual(
          res.body.data.messages.map((m: { id: string }) => m.id),
          [ids.there, ids.hello, ids.hi],
          jid,
        );
      }
      const inGroup = await t.call('GET', `/v1/chats/${group}/messages`);
      assert.deepEqual(
        inGroup.body.data.messages.map((m: { id: string; sender: string; isGroup: boolean }) => [
          m.id,
          m.sender,
          m.isGroup,
        ]),
        [[ids.team, jidOf(BIA), true]],
      );
      const none = await t.call('GET', '/v1/chats/5511977776666/messages');
      assert.deepEqual(none.body, ok({ messages: [], nextCursor: null }));
    });

    it('validates jid, limit and cursor naming the field', async () => {
      for (const jid of ['abc', '123', '5511@g.uss', 'x@g.us', `${PEER}@lid.us`]) {
        const res = await t.call('GET', `/v1/chats/${encodeURIComponent(jid)}/messages`);
        assert.deepEqual(res.body, bad(400, JID_RULE), jid);
      }
      for (const path of ['/v1/chats', `/v1/chats/${PEER}/messages`]) {
        for (const limit of ['0', '101', 'x']) {
          const res = await t.call('GET', `${path}?limit=${limit}`);
          assert.deepEqual(res.body, bad(400, 'limit must be an integer from 1 to 100'), `${path} ${limit}`);
        }
        for (const cursor of ['nope', Buffer.from('["x","y"]').toString('base64url')]) {
          const res = await t.call('GET', `${path}?cursor=${cursor}`);
          assert.deepEqual(
            res.body,
            bad(400, 'cursor is not valid: pass the nextCursor of a previous page'),
            `${path} ${cursor}`,
          );
        }
      }
    });

    it('shows one message with its delivery state moving sent → delivered → read → played', async () => {
      const get = () => t.call('GET', `/v1/messages/${ids.hello}`);
      const before = await get();
      assert.deepEqual(
        before.body,
        ok({
          id: ids.hello,
          chat: jidOf(PEER),
          sender: jidOf(OWN),
          fromMe: true,
          isGroup: false,
          pushName: `Sandbox ${OWN.slice(-4)}`,
          timestamp: at(1),
          kind: 'text',
          message: { conversation: 'hello Ana' },
          state: 'sent',
          stateAt: at(1),
          status: 'sent',
        }),
      );
      for (const state of ['delivered', 'read', 'played'] as const) {
        t.clock.advance(1000);
        const receipt = await t.call('POST', '/v1/sandbox/receipt', { id: ids.hello, state });
        assert.equal(receipt.status, 200);
        const now = await get();
        assert.equal(now.body.data.state, state);
        assert.equal(now.body.data.status, state);
        assert.equal(now.body.data.stateAt, new Date(t.clock()).toISOString());
      }
      const missing = await t.call('GET', '/v1/messages/NEVER-STORED');
      assert.deepEqual(missing.body, bad(404, 'message not found'));
    });

    it('needs scope chat:messages', async () => {
      const contactsOnly = await t.newKey({ scopes: ['chat:contacts'] });
      for (const path of ['/v1/chats', `/v1/chats/${PEER}/messages`, `/v1/messages/${ids.hi}`]) {
        const res = await t.call('GET', path, undefined, { authorization: `Bearer ${contactsOnly}` });
        assert.deepEqual(res.body, bad(403, 'API key lacks required scope chat:messages'), path);
      }
    });
  });
}
