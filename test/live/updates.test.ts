/**
 * Edits, deletions for everyone, polls, mentions and chat presence through parley's HTTP API with a live key,
 * against the platform simulator: what the simulated recipient's phone decrypted (a protocolMessage
 * MESSAGE_EDIT / REVOKE, the poll creation message, the mentions' contextInfo, the chat state), and what the
 * webhook received when the simulated user edits, deletes or votes (the vote decrypted to option names).
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: edit, delete, polls, mentions, chat presence against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990000';
    const ana = '5541988887777';
    const bia = '5541977776666';
    const anaJid = `${ana}@s.whatsapp.net`;
    const source = { chat: anaJid, sender: anaJid, isFromMe: false, isGroup: false };

    const inbox = (phone: string) => sim.context.accounts.get(phone)?.inbox ?? [];
    const received = (what: string, match: (entry: InboxEntry) => boolean) =>
      until(what, () => inbox(ana).find(match));

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await control(sim, 'POST', '/users', { phone: bia, pushName: 'Bia' });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop, ['Message', 'MessageUpdate', 'PollVote']);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('edit: the recipient decrypts a MESSAGE_EDIT of the message with the new text', async () => {
      const sent = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'ships today' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id = sent.body.data.id as string;
      await received('the original text', (e) => e.id === id && e.type === 'text');
      const edit = await app.live('POST', '/v1/messages/edit', { phone: ana, id, body: 'ships tomorrow' });
      assert.equal(edit.status, 200, JSON.stringify(edit.body));
      assert.equal(edit.body.data.details, 'Edited');
      assert.equal(edit.body.data.id, id);
      const entry = await received('the edit', (e) => e.type === 'edit' && e.targetId === id);
      assert.equal(entry.text, 'ships tomorrow');
      assert.equal(entry.from, shop);
      assert.equal(JSON.parse((await messageRow(app, id))?.content ?? '{}').text, 'ships tomorrow');
    });

    it('delete: the recipient decrypts a REVOKE of the message', async () => {
      const sent = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'wrong chat' });
      const id = sent.body.data.id as string;
      const del = await app.live('POST', '/v1/messages/delete', { phone: ana, id });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      assert.equal(del.body.data.details, 'Deleted');
      await received('the revoke', (e) => e.type === 'revoke' && e.targetId === id);
      assert.ok(JSON.parse((await messageRow(app, id))?.content ?? '{}').deletedAt);
    });

    it('mentions: the recipient decrypts contextInfo.mentionedJid on a text and a caption', async () => {
      const text = await app.live('POST', '/v1/messages/send', {
        phone: ana,
        body: `ask @${bia}`,
        mentions: [bia],
      });
      assert.equal(text.status, 200, JSON.stringify(text.body));
      const entry = await received('the text with a mention', (e) => e.id === text.body.data.id);
      assert.deepEqual(entry.mentions, [`${bia}@s.whatsapp.net`]);
      assert.equal(entry.text, `ask @${bia}`);
      const jpeg = readFileSync(new URL('../fixtures/media/tiny.jpg', import.meta.url)).toString('base64');
      const image = await app.live('POST', '/v1/messages/send/image', {
        phone: ana,
        image: `data:image/jpeg;base64,${jpeg}`,
        caption: `for @${bia}`,
        mentions: [bia],
      });
      assert.equal(image.status, 200, JSON.stringify(image.body));
      const captioned = await received('the caption with a mention', (e) => e.id === image.body.data.id);
      assert.deepEqual(captioned.mentions, [`${bia}@s.whatsapp.net`]);
      assert.equal(captioned.caption, `for @${bia}`);
    });

    it('poll: the recipient decrypts the poll; the user votes; the webhook gets the option names', async () => {
      const sent = await app.live('POST', '/v1/messages/send/poll', {
        phone: ana,
        name: 'Which day?',
        options: ['Monday', 'Tuesday', 'Friday'],
        selectableCount: 2,
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const pollId = sent.body.data.id as string;
      const entry = await received('the poll', (e) => e.id === pollId);
      assert.equal(entry.type, 'poll');
      assert.deepEqual(entry.poll, {
        name: 'Which day?',
        options: ['Monday', 'Tuesday', 'Friday'],
        selectableCount: 2,
      });

      const vote = await control(sim, 'POST', '/polls/vote', {
        from: ana,
        to: shop,
        pollId,
        options: ['Tuesday', 'Friday'],
      });
      assert.equal(vote.status, 201, JSON.stringify(vote.body));
      const hook = await waitForWebhook(receiver, (b) => b.type === 'PollVote', 'the PollVote webhook');
      assert.deepEqual(hook.body.event, {
        pollId,
        pollName: 'Which day?',
        messageSource: source,
        selectedOptions: ['Tuesday', 'Friday'],
        timestamp: hook.body.event.timestamp,
      });
      assert.equal(hook.body.instanceId, app.instanceId);

      const bad = await control(sim, 'POST', '/polls/vote', {
        from: ana,
        to: shop,
        pollId,
        options: ['Sunday'],
      });
      assert.equal(bad.status, 400);
      const unknown = await control(sim, 'POST', '/polls/vote', { from: bia, to: shop, pollId, options: [] });
      assert.equal(unknown.status, 404);
    });

    it('group: a member votes on a poll and edits a message; the webhooks name the group and the member', async () => {
      const created = await app.live('POST', '/v1/groups/create', {
        name: 'Lunch',
        participants: [ana, bia],
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const group = created.body.data.jid as string;
      const sent = await app.live('POST', '/v1/messages/send/poll', {
        phone: group,
        name: 'Where?',
        options: ['Pizza', 'Sushi'],
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const pollId = sent.body.data.id as string;
      const entry = await until('the group poll in Bia’s inbox', () =>
        inbox(bia).find((e) => e.id === pollId),
      );
      assert.equal(entry.group, group);
      const vote = await control(sim, 'POST', '/polls/vote', {
        from: bia,
        to: shop,
        pollId,
        options: ['Sushi', 'Pizza'],
        groupJid: group,
      });
      assert.equal(vote.status, 201, JSON.stringify(vote.body));
      const hook = await waitForWebhook(
        receiver,
        (b) => b.type === 'PollVote' && b.event.pollId === pollId,
        'the group PollVote webhook',
      );
      assert.deepEqual(hook.body.event.messageSource, {
        chat: group,
        sender: `${bia}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: true,
      });
      assert.deepEqual(hook.body.event.selectedOptions, ['Pizza', 'Sushi']);
      const outside = await control(sim, 'POST', '/polls/vote', { from: bia, to: shop, pollId, options: [] });
      assert.equal(outside.status, 404, 'a group poll is voted on in its group');

      const said = await control(sim, 'POST', '/messages', {
        from: bia,
        to: shop,
        text: 'Pizza!',
        groupJid: group,
      });
      assert.equal(said.status, 201, JSON.stringify(said.body));
      const id = said.body.id as string;
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === id,
        'the group message',
      );
      const edit = await control(sim, 'POST', '/messages/edit', {
        from: bia,
        to: shop,
        id,
        text: 'Sushi!',
        groupJid: group,
      });
      assert.equal(edit.status, 201, JSON.stringify(edit.body));
      const edited = await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.messageId === id,
        'the group edit webhook',
      );
      assert.deepEqual(edited.body.event.messageSource, {
        chat: group,
        sender: `${bia}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: true,
      });
      assert.equal(edited.body.event.text, 'Sushi!');
    });

    it('the user edits and deletes their message: MessageUpdate webhooks with the sender', async () => {
      const message = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'at 5?' });
      assert.equal(message.status, 201, JSON.stringify(message.body));
      const id = message.body.id as string;
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, 'the message');
      const edit = await control(sim, 'POST', '/messages/edit', { from: ana, to: shop, id, text: 'at 6?' });
      assert.equal(edit.status, 201, JSON.stringify(edit.body));
      const edited = await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.kind === 'edit' && b.event.messageId === id,
        'the edit webhook',
      );
      assert.deepEqual(edited.body.event, {
        kind: 'edit',
        messageId: id,
        messageSource: source,
        text: 'at 6?',
        timestamp: edited.body.event.timestamp,
      });
      assert.equal(JSON.parse((await messageRow(app, id))?.content ?? '{}').text, 'at 6?');
      const del = await control(sim, 'POST', '/messages/delete', { from: ana, to: shop, id });
      assert.equal(del.status, 201, JSON.stringify(del.body));
      const deleted = await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.kind === 'delete' && b.event.messageId === id,
        'the delete webhook',
      );
      assert.deepEqual(deleted.body.event.messageSource, source);
      const none = await control(sim, 'POST', '/messages/edit', {
        from: ana,
        to: shop,
        id: 'NOPE',
        text: 'x',
      });
      assert.equal(none.status, 404);
    });

    it('chat presence: the recipient sees composing, recording and paused', async () => {
      for (const state of ['composing', 'recording', 'paused'] as const) {
        const res = await app.live('POST', '/v1/chats/presence', { phone: ana, state });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        await received(`chat state ${state}`, (e) => e.type === 'chatstate' && e.state === state);
      }
      const online = await app.live('POST', '/v1/chats/presence', { phone: ana, state: 'available' });
      assert.equal(online.status, 200, JSON.stringify(online.body));
    });
  });
}
