/**
 * Chat actions and starring on the sandbox (docs/api.md#chats, docs/decisions/0043-chat-actions-and-star.md):
 * status codes, exact bodies, 400s naming the field, 404 for an unknown message, and the chat state the simulated
 * platform keeps for the account after each action.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SandboxChatsState } from '../../src/engines/sandbox/chat-actions.ts';
import { sandboxLidOf } from '../../src/engines/sandbox/lids.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const OWN = '5511999990001';
const ANA = '5511988887777';
const ANA_JID = `${ANA}@s.whatsapp.net`;

const bad = (status: number, message: string) => ({ error: { code: status, message } });
const okBody = (data: unknown) => ({ success: true, code: 200, data });

/** The account's chat state as the sandbox keeps it. */
async function platformState(t: TestApp): Promise<SandboxChatsState> {
  const session = t.services.sessions.ready(t.instance) as unknown as {
    chatsState(): Promise<SandboxChatsState>;
  };
  return session.chatsState();
}

for (const dialect of testDialects()) {
  describe(`chat actions and starring (docs/api.md#chats) [${dialect}]`, () => {
    let t: TestApp;
    let received = '';
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    it('answers 409 before login', async () => {
      for (const path of ['/v1/chats/5511988887777/archive', '/v1/messages/ABC/star']) {
        assert.deepEqual((await t.call('POST', path)).body, bad(409, 'instance is not logged in'));
      }
      await loginSandbox(t, OWN);
      const inbound = await t.call('POST', '/v1/sandbox/inbound', {
        phone: ANA,
        body: 'hi',
        pushName: 'Ana',
      });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      received = inbound.body.data.id;
    });

    it('archive, unarchive, pin, unpin, mark-unread: exact answers and the platform state after each', async () => {
      const steps: [string, string, Partial<SandboxChatsState['chats'][string]>][] = [
        ['archive', 'Archived', { archived: true, pinned: false }],
        ['unarchive', 'Unarchived', { archived: false }],
        ['pin', 'Pinned', { pinned: true }],
        ['mark-unread', 'Marked as unread', { markedUnread: true }],
        ['unpin', 'Unpinned', { pinned: false }],
      ];
      let expected = {
        archived: false,
        pinned: false,
        mutedUntil: null as number | null,
        markedUnread: false,
      };
      for (const [action, details, change] of steps) {
        const res = await t.call('POST', `/v1/chats/${ANA}/${action}`);
        assert.deepEqual(res.body, okBody({ details, chat: ANA_JID }), action);
        expected = { ...expected, ...change };
        assert.deepEqual((await platformState(t)).chats[ANA_JID], expected, action);
      }
      // A user JID names the same chat; a group JID is kept as given.
      const byJid = await t.call('POST', `/v1/chats/${ANA_JID}/pin`);
      assert.deepEqual(byJid.body, okBody({ details: 'Pinned', chat: ANA_JID }));
      const group = await t.call('POST', '/v1/chats/120363025246125486@g.us/archive');
      assert.deepEqual(group.body, okBody({ details: 'Archived', chat: '120363025246125486@g.us' }));
    });

    it("a user's chat named by LID before parley knows the number is the chat of the phone JID after", async () => {
      const BIA = '5511966665555';
      const BIA_JID = `${BIA}@s.whatsapp.net`;
      const BIA_LID = `${sandboxLidOf(BIA)}@lid`;
      const pinned = await t.call('POST', `/v1/chats/${encodeURIComponent(BIA_LID)}/pin`);
      assert.deepEqual(pinned.body, okBody({ details: 'Pinned', chat: BIA_LID }));
      // The simulated platform keeps one state for the chat, whatever name an action gives it.
      const state = { archived: false, pinned: true, mutedUntil: null, markedUnread: false };
      assert.deepEqual((await platformState(t)).chats[BIA_JID], state);
      assert.equal((await platformState(t)).chats[BIA_LID], undefined);
      assert.equal((await t.call('POST', '/v1/sandbox/inbound', { phone: BIA, body: 'hi' })).status, 200);
      const unpinned = await t.call('POST', `/v1/chats/${encodeURIComponent(BIA_LID)}/unpin`);
      assert.deepEqual(unpinned.body, okBody({ details: 'Unpinned', chat: BIA_JID }));
      assert.deepEqual((await platformState(t)).chats[BIA_JID], { ...state, pinned: false });
    });

    it('mute until a time, mute until unmuted, unmute', async () => {
      const until = new Date(t.clock() + 8 * 3600_000);
      const muted = await t.call('POST', `/v1/chats/${ANA}/mute`, { until: until.toISOString() });
      assert.deepEqual(
        muted.body,
        okBody({ details: 'Muted', chat: ANA_JID, mutedUntil: until.toISOString() }),
      );
      assert.equal((await platformState(t)).chats[ANA_JID]?.mutedUntil, until.getTime());
      // An offset is accepted and answered in UTC.
      const offset = await t.call('POST', `/v1/chats/${ANA}/mute`, { until: '2099-01-01T03:00:00+03:00' });
      assert.deepEqual(
        offset.body,
        okBody({ details: 'Muted', chat: ANA_JID, mutedUntil: '2099-01-01T00:00:00.000Z' }),
      );
      const always = await t.call('POST', `/v1/chats/${ANA}/mute`, {});
      assert.deepEqual(always.body, okBody({ details: 'Muted', chat: ANA_JID, mutedUntil: null }));
      // No body at all is the same as an empty one.
      const bare = await t.call('POST', `/v1/chats/${ANA}/mute`);
      assert.deepEqual(bare.body, okBody({ details: 'Muted', chat: ANA_JID, mutedUntil: null }));
      assert.equal((await platformState(t)).chats[ANA_JID]?.mutedUntil, -1);
      const unmuted = await t.call('POST', `/v1/chats/${ANA}/unmute`);
      assert.deepEqual(unmuted.body, okBody({ details: 'Unmuted', chat: ANA_JID }));
      assert.equal((await platformState(t)).chats[ANA_JID]?.mutedUntil, null);
    });

    it('400s name the field: a bad or past until, a bad chat', async () => {
      const mute = (body: unknown) => t.call('POST', `/v1/chats/${ANA}/mute`, body);
      assert.deepEqual(
        (await mute({ until: 'tomorrow' })).body,
        bad(400, 'until must be an RFC 3339 time (e.g. 2030-01-01T00:00:00Z)'),
      );
      assert.deepEqual(
        (await mute({ until: '2030-02-30T00:00:00Z' })).body,
        bad(400, 'until must be an RFC 3339 time (e.g. 2030-01-01T00:00:00Z)'),
      );
      assert.deepEqual(
        (await mute({ until: new Date(t.clock() - 1000).toISOString() })).body,
        bad(400, 'until must be in the future'),
      );
      assert.deepEqual((await mute({ until: 5 })).body, bad(400, 'until must be a string'));
      // Past 9999-12-31T23:59:59.999Z once in UTC, the answer's mutedUntil would be `+010000-…`, no RFC 3339 time: the
      // mute was applied and then answered 500. Refused before anything is changed.
      const before = (await platformState(t)).chats[ANA_JID];
      for (const until of ['9999-12-31T23:59:59-00:01', '9999-12-31T23:59:59-23:59'])
        assert.deepEqual(
          (await mute({ until })).body,
          bad(400, 'until must be at most 9999-12-31T23:59:59.999Z'),
          until,
        );
      assert.deepEqual((await platformState(t)).chats[ANA_JID], before, 'nothing applied');
      const latest = await mute({ until: '9999-12-31T23:59:59.999+00:00' });
      assert.deepEqual(
        latest.body,
        okBody({ details: 'Muted', chat: ANA_JID, mutedUntil: '9999-12-31T23:59:59.999Z' }),
      );
      assert.equal((await t.call('POST', `/v1/chats/${ANA}/unmute`)).status, 200);
      assert.deepEqual(
        (await t.call('POST', '/v1/chats/not-a-chat/archive')).body,
        bad(
          400,
          'jid must be a phone number (digits only, international format), a user JID (<phone>@s.whatsapp.net), a group JID (<id>@g.us) or a LID (<digits>@lid)',
        ),
      );
    });

    it('star and unstar a stored message; 404 for an unknown one', async () => {
      const starred = await t.call('POST', `/v1/messages/${received}/star`);
      assert.deepEqual(starred.body, okBody({ details: 'Starred', id: received, chat: ANA_JID }));
      assert.deepEqual((await platformState(t)).starred, [received]);
      const unstarred = await t.call('POST', `/v1/messages/${received}/unstar`);
      assert.deepEqual(unstarred.body, okBody({ details: 'Unstarred', id: received, chat: ANA_JID }));
      assert.deepEqual((await platformState(t)).starred, []);
      const missing = await t.call('POST', '/v1/messages/3EB0NOTSTORED/star');
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, bad(404, 'message not found'));
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/3EB0NOTSTORED/unstar')).body,
        bad(404, 'message not found'),
      );
    });

    it('needs scope chat:messages', async () => {
      const key = await t.newKey({ scopes: ['chat:contacts'] });
      const res = await t.call('POST', `/v1/chats/${ANA}/archive`, undefined, {
        authorization: `Bearer ${key}`,
      });
      assert.equal(res.status, 403);
    });
  });
}
