/**
 * A vote relayed in another chat than its poll's, with a live key against the platform simulator: the account's poll
 * goes to Ana, and Bia, who got hold of its secret, encrypts a vote for her own JID and sends it in her own chat with
 * the account. The live engine decrypts it (the voter's JID is the key's); a phone looks the poll up in the chat the
 * vote came in and ignores it, and so does parley's store where the vote is recorded: no `PollVote` reaches the
 * webhook, while Ana's vote in the poll's chat does (docs/decisions/0026-chats-edits-polls-and-calls.md). Runs on
 * SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
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
  describe(`live engine: a poll vote relayed in another chat (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990710';
    const ana = '5541988887710';
    const bia = '5541977776610';
    const shopJid = `${shop}@s.whatsapp.net`;
    const anaJid = `${ana}@s.whatsapp.net`;
    const biaJid = `${bia}@s.whatsapp.net`;
    const user = (phone: string) => simulatedUser(sim, phone);

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await control(sim, 'POST', '/users', { phone: bia, pushName: 'Bia' });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop, ['Message', 'PollVote']);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it("Bia's vote on Ana's poll, sent in Bia's chat, makes no PollVote; Ana's does", async () => {
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
      const vote = encryptVote({ secret }, { pollId, creatorJid: shopJid, voterJid: biaJid }, ['B']);
      await sendMessage(sim.context.signalQueue, user(bia), user(shop), {
        pollUpdateMessage: {
          pollCreationMessageKey: { remoteJid: shopJid, fromMe: false, id: pollId },
          vote,
          senderTimestampMs: Date.now(),
        },
      });
      // Ana's vote comes last: once it is in, Bia's before it was handled.
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
      assert.deepEqual(seen, [[{ chat: anaJid, sender: anaJid, isFromMe: false, isGroup: false }, ['A']]]);
    });
  });
}
