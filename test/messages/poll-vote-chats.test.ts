/**
 * A poll vote counts in its poll's chat only (docs/decisions/0026-chats-edits-polls-and-calls.md): the platform relays
 * a `pollUpdateMessage` naming any poll id, in any chat, and the live engine decrypts it with the poll's secret and the
 * voter's JID, which anyone who holds the secret (a member of the group it was sent to, who may have left since, or
 * the one user it was sent to, passing it on) can encrypt for. A phone finds the poll a vote names in the chat the
 * vote came in, so one from another chat changes nothing there; parley's store decides the same where the vote is
 * recorded, in its transaction: no `PollVote` event, and a vote in the poll's chat (a LID chat and its kept phone JID
 * being one) is reported. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PollVote } from '../../src/domain/messages.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, OWN, PEER, storedBodies } from './support.ts';

const OTHER = '5511977776666';
const jid = (phone: string) => `${phone}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`poll votes count in their poll's chat only [${dialect}]`, () => {
    let t: TestApp;
    let pollId: string;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      const poll = await t.call('POST', '/v1/messages/send/poll', {
        phone: PEER,
        name: 'Day?',
        options: ['Mon', 'Tue'],
      });
      assert.equal(poll.status, 200, JSON.stringify(poll.body));
      pollId = poll.body.data.id;
    });
    after(() => t.close());

    /** A vote of `voter` in chat JID `chat`, recorded as the live engine records one it decrypted. */
    let n = 0;
    const vote = (voter: string, chat: string, options: string[]) => {
      n += 1;
      const decrypted: PollVote = {
        pollId,
        pollName: 'Day?',
        source: { chat, sender: jid(voter), isFromMe: false, isGroup: false },
        selectedOptions: options,
        timestamp: t.clock(),
      };
      return t.services.recorder.record(t.instance.id, {
        type: 'pollVote',
        vote: decrypted,
        platformId: `VOTE${n}`,
      });
    };

    it('a vote that came in another chat than its poll makes no PollVote event; one in its chat does', async () => {
      await vote(OTHER, jid(OTHER), ['Tue']);
      await vote(PEER, jid(PEER), ['Mon']);
      const votes = await storedBodies(t, 'PollVote');
      assert.deepEqual(
        votes.map((body) => [body.event.messageSource.chat, body.event.selectedOptions]),
        [[jid(PEER), ['Mon']]],
      );
    });

    it('a LID chat is judged by its kept phone JID; one without a kept pair cannot be told apart and counts', async () => {
      const before = (await storedBodies(t, 'PollVote')).length;
      await t.services.recorder.record(t.instance.id, {
        type: 'lid-mapping',
        mappings: [{ lid: '987654321', phone: OTHER }],
      });
      // OTHER's LID, its pair kept: OTHER's chat, not the poll's.
      await vote(OTHER, '987654321@lid', ['Mon']);
      // A LID no kept pair names.
      await vote(PEER, '123456789@lid', ['Tue']);
      const votes = (await storedBodies(t, 'PollVote')).slice(before);
      assert.deepEqual(
        votes.map((body) => body.event.selectedOptions),
        [['Tue']],
      );
    });
  });
}
