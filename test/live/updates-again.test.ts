/**
 * Edits, deletions, poll votes and reactions the platform hands over again
 * (docs/decisions/0024-engines-and-data-flow.md: a message handed over again is recorded once). The account's
 * acknowledgements are lost on the way (`lose-acks`), so when its socket closes the platform puts every message of the
 * connection back into the device's offline queue and hands it over again at the next login. Before, an edit and a
 * vote came back as a second `MessageUpdate` and a second `PollVote` webhook: only `message` events were told apart
 * as copies.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sendMessage } from '../../sim/messaging/send.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import {
  control,
  type LiveApp,
  liveApp,
  pairLive,
  simulatedUser,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: updates handed over again after lost acknowledgements (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990100';
    const ana = '5541988887100';

    const user = (phone: string) => simulatedUser(sim, phone);

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop, ['Message', 'MessageUpdate', 'PollVote']);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('an edit, a vote, a reaction and a deletion come again at the next login: one webhook each', async () => {
      const said = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'at 5?' });
      const id = said.body.id as string;
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, 'the message');
      const gone = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'typo' });
      const goneId = gone.body.id as string;
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === goneId, 'the typo');
      const poll = await app.live('POST', '/v1/messages/send/poll', {
        phone: ana,
        name: 'Q?',
        options: ['A', 'B'],
      });
      assert.equal(poll.status, 200, JSON.stringify(poll.body));
      const pollId = poll.body.data.id as string;
      await until('the poll at Ana', () => user(ana).inbox.find((e) => e.id === pollId));

      // From here the account's acknowledgements are lost: every message of this connection comes again.
      assert.equal((await control(sim, 'POST', '/faults', { phone: shop, kind: 'lose-acks' })).status, 200);
      const edit = await control(sim, 'POST', '/messages/edit', { from: ana, to: shop, id, text: 'at 6?' });
      assert.equal(edit.status, 201, JSON.stringify(edit.body));
      await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.messageId === id,
        'the edit',
      );
      const vote = await control(sim, 'POST', '/polls/vote', { from: ana, to: shop, pollId, options: ['B'] });
      assert.equal(vote.status, 201, JSON.stringify(vote.body));
      await waitForWebhook(receiver, (b) => b.type === 'PollVote' && b.event.pollId === pollId, 'the vote');
      const reaction = await sendMessage(sim.context.signalQueue, user(ana), user(shop), {
        reactionMessage: { key: { remoteJid: `${shop}@s.whatsapp.net`, fromMe: false, id }, text: '👍' },
      });
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === reaction.id,
        'the reaction',
      );
      const del = await control(sim, 'POST', '/messages/delete', { from: ana, to: shop, id: goneId });
      assert.equal(del.status, 201, JSON.stringify(del.body));
      await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.messageId === goneId,
        'the deletion',
      );

      // The session goes offline; a marker waits in the device's offline queue behind the four, which the platform
      // hands over again, in order, at the next login: once the marker is recorded, so are they.
      assert.equal((await app.live('POST', '/v1/session/disconnect')).status, 200);
      await waitForStatus(app, false, true);
      const marker = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'marker' });
      assert.equal(marker.status, 201, JSON.stringify(marker.body));
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === marker.body.id,
        'the marker, handed over after the four',
      );

      const all = bodies(receiver.requests);
      const sequences = (type: string, about: (b: any) => boolean) =>
        all.filter((b) => b.type === type && about(b)).map((b) => b.sequence);
      assert.equal(sequences('MessageUpdate', (b) => b.event.messageId === id).length, 1, 'the edit twice');
      assert.equal(sequences('PollVote', (b) => b.event.pollId === pollId).length, 1, 'the vote twice');
      assert.equal(
        sequences('Message', (b) => b.event.info.id === reaction.id).length,
        1,
        'the reaction twice',
      );
      assert.equal(
        sequences('MessageUpdate', (b) => b.event.messageId === goneId).length,
        1,
        'the delete twice',
      );
      const content = JSON.parse((await messageRow(app, id))?.content ?? '{}');
      assert.equal(content.text, 'at 6?');
      assert.ok(content.editedAt);
    });
  });
}
