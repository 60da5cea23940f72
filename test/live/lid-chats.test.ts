/**
 * A chat parley stored under a LID (a user whose number the platform keeps private wrote first, or was written to by
 * `<lid>@lid`) becomes the phone JID's chat once parley learns the pair (docs/decisions/0038-lid-mappings.md), against
 * the platform simulator. Before, its messages stayed under the LID: `GET /v1/chats` still listed the LID chat but
 * `GET /v1/chats/<lid>@lid/messages` answered the phone JID's, so the first messages were out of every chat route's
 * reach; the user's edits and deletions of them, named by phone JID, were dropped (no `MessageUpdate`, text
 * unchanged); and their read receipts were reported but left the stored message `sent`. The chat keeps its user's
 * name (it had none until the user wrote again); a group member stored by LID is named by number (group history kept
 * the LID); and a send by LID to a user written to by number opens no second chat for the new-chats pace (it read
 * the LID's chat, empty). The contacts list names the user once, by number: the platform's contact update had
 * stored the user under the LID, listed beside the phone JID of the moved chat's peer. Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: a LID chat once its pair is learned (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5521999990000';

    /** A user whose number the simulated platform keeps private; its LID JID. */
    const hiddenUser = async (phone: string): Promise<string> => {
      const created = await control(sim, 'POST', '/users', { phone, pushName: 'Private', hidesPhone: true });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return `${created.body.lid}@lid`;
    };
    /** Learns the pair of `phone` through the lookup route (parley asks the platform). */
    const learn = async (phone: string, lid: string) => {
      const pair = await app.live('GET', `/v1/contacts/lid?phone=${phone}`);
      assert.equal(pair.status, 200, JSON.stringify(pair.body));
      assert.deepEqual(pair.body.data, { phone, lid });
    };
    const historyIds = async (jid: string): Promise<string[]> => {
      const page = await app.live('GET', `/v1/chats/${encodeURIComponent(jid)}/messages`);
      assert.equal(page.status, 200, JSON.stringify(page.body));
      return page.body.data.messages.map((m: { id: string }) => m.id);
    };

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await pairLive(sim, app, shop, ['Message', 'MessageUpdate', 'ReadReceipt']);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('the messages stored under the LID move to the phone JID: one chat, read by either name', async () => {
      const hidden = '5521966665555';
      const lid = await hiddenUser(hidden);
      const phoneJid = `${hidden}@s.whatsapp.net`;
      const first = await control(sim, 'POST', '/messages', {
        from: hidden,
        to: shop,
        text: 'first, by LID',
      });
      const stored = await until('the first message', () => messageRow(app, first.body.id));
      assert.equal(stored.chat, lid, 'stored under the LID while the number is unknown');
      assert.deepEqual(await historyIds(lid), [first.body.id]);

      await learn(hidden, lid);
      const moved = await messageRow(app, first.body.id);
      assert.deepEqual([moved?.chat, moved?.sender], [phoneJid, phoneJid], 'moved with the pair');
      // The name the user's messages carried comes with the chat, before the user writes again.
      const listed = await app.live('GET', '/v1/chats');
      assert.deepEqual(
        listed.body.data.chats.find((c: { jid: string }) => c.jid === phoneJid)?.name,
        'Private',
        JSON.stringify(listed.body.data.chats),
      );
      const reply = await app.live('POST', '/v1/messages/send', { phone: hidden, body: 'reply by phone' });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const second = await control(sim, 'POST', '/messages', { from: hidden, to: shop, text: 'second' });
      await until('the second message', () => messageRow(app, second.body.id));
      const all = [second.body.id, reply.body.data.id, first.body.id];
      assert.deepEqual(new Set(await historyIds(lid)), new Set(all), 'by LID: the whole chat');
      assert.deepEqual(new Set(await historyIds(hidden)), new Set(all), 'by phone: the same chat');
      const chats = await app.live('GET', '/v1/chats');
      const jids = chats.body.data.chats.map((c: { jid: string }) => c.jid);
      assert.ok(jids.includes(phoneJid), JSON.stringify(jids));
      assert.equal(jids.includes(lid), false, 'no second chat under the LID');
    });

    it("the user's edit and deletion of a message stored under the LID are reported and applied", async () => {
      const hidden = '5521955554444';
      const lid = await hiddenUser(hidden);
      const m = await control(sim, 'POST', '/messages', { from: hidden, to: shop, text: 'typo here' });
      assert.equal((await until('stored', () => messageRow(app, m.body.id))).chat, lid);
      await learn(hidden, lid);

      const edit = await control(sim, 'POST', '/messages/edit', {
        from: hidden,
        to: shop,
        id: m.body.id,
        text: 'fixed',
      });
      assert.equal(edit.status, 201, JSON.stringify(edit.body));
      const edited = await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.messageId === m.body.id && b.event.kind === 'edit',
        'the edit',
      );
      assert.equal(edited.body.event.messageSource.chat, `${hidden}@s.whatsapp.net`);
      const afterEdit = await app.live('GET', `/v1/messages/${m.body.id}`);
      assert.deepEqual(afterEdit.body.data.message, { conversation: 'fixed' });
      assert.equal(typeof afterEdit.body.data.editedAt, 'string');

      const del = await control(sim, 'POST', '/messages/delete', { from: hidden, to: shop, id: m.body.id });
      assert.equal(del.status, 201, JSON.stringify(del.body));
      await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.messageId === m.body.id && b.event.kind === 'delete',
        'the deletion',
      );
      const afterDelete = await app.live('GET', `/v1/messages/${m.body.id}`);
      assert.equal(typeof afterDelete.body.data.deletedAt, 'string');
      assert.equal(JSON.stringify(afterDelete.body.data).includes('fixed'), false, 'the text is gone');
    });

    it('a read receipt for a message sent to <lid>@lid moves it to read once the pair is learned', async () => {
      const hidden = '5521944443333';
      const lid = await hiddenUser(hidden);
      const sent = await app.live('POST', '/v1/messages/send', { phone: lid, body: 'hello private' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id = sent.body.data.id;
      await until('in the inbox', () => sim.context.accounts.get(hidden)?.inbox.find((e) => e.id === id));
      assert.deepEqual(
        [(await messageRow(app, id))?.chat, (await messageRow(app, id))?.state],
        [lid, 'sent'],
      );
      await learn(hidden, lid);
      const r = await control(sim, 'POST', '/receipts', { from: hidden, to: shop, ids: [id], type: 'read' });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      await waitForWebhook(
        receiver,
        (b) => b.type === 'ReadReceipt' && b.state === 'Read' && b.event.messageIds?.includes(id),
        'the read receipt',
      );
      // The state moves in the transaction that stores the receipt's webhook event: it is there once the event is.
      const row = await messageRow(app, id);
      assert.deepEqual([row?.chat, row?.state], [`${hidden}@s.whatsapp.net`, 'read']);
    });

    it('a send by LID to a user written to by number opens no second chat (the new-chats pace)', async () => {
      const hidden = '5521922221111';
      const lid = await hiddenUser(hidden);
      await learn(hidden, lid);
      // A cap makes every relay tell whether it opened a chat (`send_jobs.new_chat`); this one is never reached.
      const cap = await app.live('PUT', '/v1/session/pacing', { newChatsPerDay: 1000 });
      assert.equal(cap.status, 200, JSON.stringify(cap.body));
      try {
        const byNumber = await app.live('POST', '/v1/messages/send', { phone: hidden, body: 'by number' });
        assert.equal(byNumber.status, 200, JSON.stringify(byNumber.body));
        const byLid = await app.live('POST', '/v1/messages/send', { phone: lid, body: 'by LID' });
        assert.equal(byLid.status, 200, JSON.stringify(byLid.body));
        const jobs = await app.t.services.store.db
          .selectFrom('send_jobs')
          .select(['id', 'chat', 'new_chat'])
          .where('instance_id', '=', app.instanceId)
          .where('id', 'in', [byNumber.body.data.id, byLid.body.data.id])
          .execute();
        const flag = (id: string) => jobs.find((j) => j.id === id);
        assert.deepEqual(
          [
            flag(byNumber.body.data.id)?.new_chat,
            flag(byLid.body.data.id)?.chat,
            flag(byLid.body.data.id)?.new_chat,
          ],
          [1, lid, 0],
          'one chat opened, by number; the send by LID goes to it',
        );
        assert.equal((await messageRow(app, byLid.body.data.id))?.chat, `${hidden}@s.whatsapp.net`);
      } finally {
        await app.live('PUT', '/v1/session/pacing', {});
      }
    });

    it("a group member's messages stored by LID name the member by number once the pair is learned", async () => {
      const hidden = '5521933332222';
      const lid = await hiddenUser(hidden);
      const phoneJid = `${hidden}@s.whatsapp.net`;
      const group = await control(sim, 'POST', '/groups', {
        creator: hidden,
        subject: 'Private club',
        participants: [shop],
      });
      assert.equal(group.status, 201, JSON.stringify(group.body));
      const groupJid: string = group.body.jid;
      const said = await control(sim, 'POST', '/messages', {
        from: hidden,
        to: shop,
        text: 'hello, members',
        groupJid,
      });
      assert.equal(said.status, 201, JSON.stringify(said.body));
      const stored = await until('the group message', () => messageRow(app, said.body.id));
      assert.deepEqual(
        [stored.chat, stored.sender],
        [groupJid, lid],
        'stored by LID while the number is unknown',
      );

      await learn(hidden, lid);
      const history = await app.live('GET', `/v1/chats/${encodeURIComponent(groupJid)}/messages`);
      assert.equal(history.status, 200, JSON.stringify(history.body));
      const read = history.body.data.messages.find((m: { id: string }) => m.id === said.body.id);
      assert.equal(read?.sender, phoneJid, JSON.stringify(read));
    });

    it('the contacts list names the user once, by number, once the pair is learned', async () => {
      const hidden = '5521911110000';
      const lid = await hiddenUser(hidden);
      const phoneJid = `${hidden}@s.whatsapp.net`;
      const contacts = async (): Promise<Record<string, { pushName: string }>> => {
        const listed = await app.live('GET', '/v1/contacts/list');
        assert.equal(listed.status, 200, JSON.stringify(listed.body));
        return listed.body.data;
      };
      const said = await control(sim, 'POST', '/messages', { from: hidden, to: shop, text: 'who am I?' });
      assert.equal(said.status, 201, JSON.stringify(said.body));
      await until('the message', () => messageRow(app, said.body.id));
      // Known by LID alone meanwhile: the platform's contact update (its push name) names the LID.
      const before = await until('the user listed under the LID', async () => (await contacts())[lid]);
      assert.equal(before.pushName, 'Private');
      assert.equal((await contacts())[phoneJid], undefined);

      await learn(hidden, lid);
      const after = await contacts();
      assert.equal(after[lid], undefined, `no entry under the LID: ${JSON.stringify(after)}`);
      assert.equal(after[phoneJid]?.pushName, 'Private', JSON.stringify(after));
    });
  });
}
