import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { appFor, OWN, sendJobRow, storedBodies } from './support.ts';

/**
 * A send to `<lid>@lid` not relayed yet names the chat as every other read does (docs/decisions/0038-lid-mappings.md):
 * by the phone JID of the pair parley keeps for the LID, by the LID while no pair is kept. `GET /v1/messages/{id}`
 * of such a send named the LID (its job's address) while its message, once relayed, the chat's history, the chat
 * list and the `Message` webhook named the phone JID. The chat list and a chat's history show no send before its
 * relay, by either name. On SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const HOUR = 3_600_000;

/** The sandbox's LID of a number (docs/decisions/0038-lid-mappings.md): its length in two digits, then reversed. */
const sandboxLid = (phone: string) =>
  `${String(phone.length).padStart(2, '0')}${[...phone].reverse().join('')}`;

for (const dialect of testDialects()) {
  describe(`a pending send by LID is named by the kept phone JID [${dialect}]`, () => {
    let t: TestApp;

    before(async () => {
      t = await appFor(dialect);
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    /** A send of `body` to `phone` scheduled an hour ahead: pending, never relayed while the clock stays. */
    const schedule = async (phone: string, body: string): Promise<string> => {
      const sendAt = new Date(t.clock() + HOUR).toISOString();
      const res = await t.call('POST', '/v1/messages/send', { phone, body, sendAt });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      return res.body.data.id;
    };

    /** The ids of the messages `GET /v1/chats/{jid}/messages` lists. */
    const historyIds = async (jid: string): Promise<string[]> => {
      const res = await t.call('GET', `/v1/chats/${jid}/messages`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data.messages.map((m: { id: string }) => m.id);
    };

    /** The JIDs `GET /v1/chats` lists. */
    const chatJids = async (): Promise<string[]> => {
      const res = await t.call('GET', '/v1/chats');
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data.chats.map((c: { jid: string }) => c.jid);
    };

    it('GET /v1/messages/{id} of a pending, then canceled, send by LID names the kept phone JID', async () => {
      const user = '5511988881111';
      const lid = sandboxLid(user);
      await upsertLidMappings(t.services.store.db, t.instance.id, [{ lid, phone: user }], T0);
      const id = await schedule(`${lid}@lid`, 'by LID, later');
      assert.equal((await sendJobRow(t, id)).chat, `${lid}@lid`, 'the job keeps the address it was given');
      const pending = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(pending.status, 200, JSON.stringify(pending.body));
      assert.equal(pending.body.data.status, 'pending');
      assert.equal(pending.body.data.chat, `${user}@s.whatsapp.net`, 'the phone JID, not the LID');
      assert.equal(pending.body.data.isGroup, false);
      assert.equal(pending.body.data.fromMe, true);
      // Neither list shows a send before its relay, by either name.
      assert.deepEqual(await historyIds(`${lid}@lid`), []);
      assert.deepEqual(await historyIds(user), []);
      const chats = await chatJids();
      assert.ok(!chats.includes(`${lid}@lid`) && !chats.includes(`${user}@s.whatsapp.net`), chats.join());

      const canceled = await t.call('POST', `/v1/messages/${id}/cancel`);
      assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
      const got = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(got.body.data.status, 'canceled');
      assert.equal(got.body.data.chat, `${user}@s.whatsapp.net`);
    });

    it('the pending read, the relayed read, the history, the chat list and the webhook name one chat', async () => {
      const user = '5511988882222';
      const lid = sandboxLid(user);
      await upsertLidMappings(t.services.store.db, t.instance.id, [{ lid, phone: user }], T0);
      const id = await schedule(`${lid}@lid`, 'by LID, relayed');
      const pending = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(pending.body.data.chat, `${user}@s.whatsapp.net`);

      t.clock.advance(HOUR);
      t.services.sendQueue.wake(t.instance.id);
      await eventually('the scheduled send relayed', async () => (await sendJobRow(t, id)).status === 'sent');
      const sent = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(sent.body.data.status, 'sent');
      assert.equal(sent.body.data.chat, pending.body.data.chat, 'named as while it was pending');
      assert.deepEqual(await historyIds(user), [id]);
      assert.deepEqual(await historyIds(`${lid}@lid`), [id], 'the LID opens the phone JID chat');
      const chats = await chatJids();
      assert.ok(chats.includes(`${user}@s.whatsapp.net`) && !chats.includes(`${lid}@lid`), chats.join());
      const message = (await storedBodies(t, 'Message')).find((body) => body.event.info.id === id);
      assert.equal(message?.event.info.messageSource.chat, `${user}@s.whatsapp.net`);
      t.clock.set(T0);
    });

    it('a pending send to a LID whose pair is not kept names the LID', async () => {
      const lid = sandboxLid('5511988883333');
      const id = await schedule(`${lid}@lid`, 'by LID, number unknown');
      const pending = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(pending.body.data.status, 'pending');
      assert.equal(pending.body.data.chat, `${lid}@lid`);
      assert.equal((await t.call('POST', `/v1/messages/${id}/cancel`)).status, 200);
    });
  });
}
