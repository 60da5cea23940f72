/**
 * A vote the account casts on its own poll from its phone, with a live key against the platform simulator: the
 * phone's copy reaches parley as an own message (`key.fromMe`) whose key names the chat's other user only, and the
 * vote is encrypted over the account's own JID (phone or LID, docs/decisions/0026-chats-edits-polls-and-calls.md).
 * It reaches the webhook as a `PollVote` from the account (`isFromMe: true`); before, the voter candidates came from
 * the key's JIDs alone, the vote decrypted with none of them and was dropped. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { encryptVote, receivedPoll } from '../../sim/messaging/polls.ts';
import { sendMessage } from '../../sim/messaging/send.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { waitForWebhook } from './observe.ts';
import {
  control,
  type LiveApp,
  liveApp,
  pairLive,
  simulatedUser,
  startTestSimulator,
  until,
} from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: the account votes on its own poll from its phone (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990700';
    const ana = '5541988887700';
    const shopJid = `${shop}@s.whatsapp.net`;
    const anaJid = `${ana}@s.whatsapp.net`;
    const user = (phone: string) => simulatedUser(sim, phone);

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop, ['Message', 'PollVote']);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('votes encrypted over the phone JID and over the LID both reach the webhook as the account’s', async () => {
      const poll = await app.live('POST', '/v1/messages/send/poll', {
        phone: ana,
        name: 'Q?',
        options: ['A', 'B'],
      });
      assert.equal(poll.status, 200, JSON.stringify(poll.body));
      const pollId: string = poll.body.data.id;
      await until('the poll at Ana', () => user(ana).inbox.find((e) => e.id === pollId));
      const secret = receivedPoll(user(ana), pollId)?.secret;
      assert.ok(secret, 'Ana holds the poll secret');
      const pollKey = { remoteJid: anaJid, fromMe: true, id: pollId };
      const votes: [string, string[]][] = [
        [shopJid, ['B']],
        [`${user(shop).lid}@lid`, ['A', 'B']],
      ];
      for (const [voterJid, options] of votes) {
        const vote = encryptVote({ secret }, { pollId, creatorJid: shopJid, voterJid }, options);
        // Sent from the account's phone: its linked devices (parley) get the copy as an own message.
        await sendMessage(sim.context.signalQueue, user(shop), user(ana), {
          pollUpdateMessage: { pollCreationMessageKey: pollKey, vote, senderTimestampMs: Date.now() },
        });
      }
      // Ana's vote comes last: once it is in, the two before it were handled.
      const marker = await control(sim, 'POST', '/polls/vote', {
        from: ana,
        to: shop,
        pollId,
        options: ['A'],
      });
      assert.equal(marker.status, 201, JSON.stringify(marker.body));
      await waitForWebhook(
        receiver,
        (b) => b.type === 'PollVote' && b.event.messageSource.sender === anaJid,
        'Ana’s vote',
      );
      const seen = bodies(receiver.requests)
        .filter((b) => b.type === 'PollVote')
        .map((b) => [b.event.messageSource, b.event.selectedOptions]);
      const own = { chat: anaJid, sender: shopJid, isFromMe: true, isGroup: false };
      assert.deepEqual(seen, [
        [own, ['B']],
        [own, ['A', 'B']],
        [{ chat: anaJid, sender: anaJid, isFromMe: false, isGroup: false }, ['A']],
      ]);
    });
  });
}
