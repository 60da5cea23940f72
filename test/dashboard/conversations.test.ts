import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createUser, type DashboardClient, signIn } from './support.ts';

const error = (code: number, message: string) => ({ error: { code, message } });

const PEER = '5511988887777';
const PEER_JID = `${PEER}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`dashboard API: conversations through the chats and messaging services [${dialect}]`, () => {
    let t: TestApp;
    let member: DashboardClient;
    let viewer: DashboardClient;
    let base = '';
    before(async () => {
      t = await createTestApp({ dialect });
      member = await signIn(t, await createUser(t, 'member'));
      viewer = await signIn(t, await createUser(t, 'viewer'));
      base = `/instances/${t.instance.id}`;
      await loginSandbox(t);
      const inbound = await t.call('POST', `/v1/sandbox/inbound?from=${t.instance.id}`, {
        phone: PEER,
        body: 'do you deliver on sundays?',
      });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
    });
    after(() => t.close());

    it('the instance list carries each instance’s latest event', async () => {
      const list = await viewer.call('GET', '/instances');
      assert.equal(list.status, 200);
      const latest = await t.services.store.db
        .selectFrom('webhook_events')
        .select(['type', 'created_at'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('sequence', 'desc')
        .executeTakeFirstOrThrow();
      assert.deepEqual(list.body.data.lastEvents, {
        [t.instance.id]: { type: latest.type, at: new Date(Number(latest.created_at)).toISOString() },
      });
      assert.equal(latest.type, 'Message');
    });

    it('lists the chats and a chat’s messages in the shapes of /v1/chats', async () => {
      const chats = await viewer.call('GET', `${base}/chats`);
      assert.equal(chats.status, 200, JSON.stringify(chats.body));
      const api = await t.call('GET', `/v1/chats?from=${t.instance.id}`);
      assert.deepEqual(chats.body.data, api.body.data, 'the dashboard answers what the API answers');
      const [chat] = chats.body.data.chats;
      assert.equal(chat.jid, PEER_JID);
      assert.equal(chat.lastMessage.text, 'do you deliver on sundays?');
      assert.equal(chat.unreadCount, 1);
      const messages = await viewer.call('GET', `${base}/chats/${encodeURIComponent(PEER_JID)}/messages`);
      assert.equal(messages.status, 200);
      assert.deepEqual(
        messages.body.data.messages.map((m: { fromMe: boolean; message: { conversation: string } }) => [
          m.fromMe,
          m.message.conversation,
        ]),
        [[false, 'do you deliver on sundays?']],
      );
    });

    it('a member replies through the messaging service; the reply is stored in the chat as sent by the number', async () => {
      t.clock.advance(1000); // the test app's clock moves by hand: the reply comes a second after the question
      const sent = await member.call('POST', `${base}/chats/${encodeURIComponent(PEER_JID)}/reply`, {
        body: 'Yes, from 9 to 1.',
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      assert.equal(sent.body.data.details, 'Sent');
      const messages = await member.call('GET', `${base}/chats/${encodeURIComponent(PEER_JID)}/messages`);
      const [newest] = messages.body.data.messages;
      assert.equal(newest.id, sent.body.data.id);
      assert.equal(newest.fromMe, true);
      assert.equal(newest.message.conversation, 'Yes, from 9 to 1.');
      const row = await t.services.store.db
        .selectFrom('messages')
        .select(['chat', 'from_me'])
        .where('id', '=', sent.body.data.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { chat: PEER_JID, from_me: 1 });
    });

    it('refuses a viewer’s reply, an empty reply and a request without the CSRF token', async () => {
      const path = `${base}/chats/${encodeURIComponent(PEER_JID)}/reply`;
      const byViewer = await viewer.call('POST', path, { body: 'hi' });
      assert.deepEqual(byViewer.body, error(403, 'this needs the member role (you are viewer)'));
      const empty = await member.call('POST', path, { body: '' });
      assert.deepEqual(empty.body, error(400, 'body must be 1 to 4096 characters'));
      const noCsrf = await member.call('POST', path, { body: 'hi' }, { csrf: false });
      assert.deepEqual(noCsrf.body, error(403, 'missing or invalid CSRF token'));
    });

    it('serves a received file whose bytes are XML as an attachment under a sandboxing CSP, a JPEG inline', async () => {
      // An "image" any contact can send: inline from the dashboard's origin, its script would run with the session.
      const xml = Buffer.from(
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><script>' +
          "fetch('/dashboard/api/me')</script></body></html>",
      );
      const jpeg = readFileSync(new URL('../fixtures/media/tiny.jpg', import.meta.url));
      const inbound = async (bytes: Buffer) => {
        const sent = await t.call('POST', `/v1/sandbox/inbound/media?from=${t.instance.id}`, {
          phone: PEER,
          kind: 'image',
          media: `data:image/jpeg;base64,${bytes.toString('base64')}`,
        });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        return viewer.call('GET', `${base}/messages/${encodeURIComponent(sent.body.data.id)}/media`);
      };
      const hostile = await inbound(xml);
      assert.equal(hostile.status, 200);
      const disposition = String(hostile.raw.headers['content-disposition']);
      assert.ok(disposition.startsWith('attachment;'), disposition);
      assert.equal(hostile.raw.headers['content-security-policy'], "default-src 'none'; sandbox");
      assert.equal(hostile.raw.headers['x-content-type-options'], 'nosniff');
      const image = await inbound(jpeg);
      assert.equal(image.raw.headers['content-type'], 'image/jpeg');
      assert.ok(String(image.raw.headers['content-disposition']).startsWith('inline;'));
      assert.equal(image.raw.headers['content-security-policy'], "default-src 'none'; sandbox");
    });

    it('answers 404 for a media file parley never received and for another organization’s instance', async () => {
      const media = await viewer.call('GET', `${base}/messages/NOPE/media`);
      assert.equal(media.status, 404);
      const other = await viewer.call('GET', '/instances/00000000-0000-4000-8000-000000000000/chats');
      assert.deepEqual(other.body, error(404, 'instance not found'));
    });
  });
}
