/**
 * A poll job relayed twice under its id (docs/decisions/0009-sends-as-jobs.md: the instance's next holder
 * relays what was left unconfirmed after a crash, "under the same id, which the recipient's phone shows once").
 * The recipient keeps the first copy, and with it the first copy's `messageSecret`; its votes are encrypted with
 * that secret. parley must still decrypt them (docs/decisions/0026: PollVote events with the option names).
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { encryptVote } from '../../sim/messaging/polls.ts';
import { decryptVote, loadPollSecret } from '../../src/engines/baileys/polls.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { type ConnectedFakeSession, connectedFakeSession } from './connected-session.ts';
import { type FakeSocket, ME } from './fake-socket.ts';
import type { RecordingContext } from './support.ts';

const ANA = '5511988887777@s.whatsapp.net';
const ME_PHONE_JID = `${ME.phone}@s.whatsapp.net`;

describe('live engine: a poll relayed again under its id', () => {
  let connected: ConnectedFakeSession;
  let session: EngineSession;
  let rc: RecordingContext;
  let sock: () => FakeSocket;

  before(async () => {
    connected = await connectedFakeSession();
    ({ session, rc, sock } = connected);
  });
  after(() => connected.close());

  it('a vote encrypted with the secret of the copy the recipient kept (the first) is decrypted', async () => {
    const id = '3EB0POLL00000000000001';
    const poll = {
      to: ANA,
      id,
      content: { kind: 'poll' as const, name: 'Day?', options: ['Mon', 'Tue'], selectableCount: 1 },
    };
    await session.send(poll);
    const first = sock().relayed.at(-1);
    // The relay went out; the process died before the job was marked sent; the next holder relays it again.
    await session.send(poll);
    const second = sock().relayed.at(-1);
    assert.equal(second?.messageId, id);
    const kept = first?.message.messageContextInfo?.messageSecret;
    assert.ok(kept);
    const vote = encryptVote(
      { secret: Buffer.from(kept) },
      { pollId: id, creatorJid: ME_PHONE_JID, voterJid: ANA },
      ['Tue'],
    );
    const stored = await loadPollSecret(rc.context.auth, id);
    assert.ok(stored);
    assert.deepEqual(
      decryptVote(vote, { ...stored, id }, [ME_PHONE_JID], [ANA]),
      ['Tue'],
      'the vote on the copy the recipient shows cannot be decrypted',
    );
    assert.deepEqual(
      Buffer.from(second?.message.messageContextInfo?.messageSecret ?? []),
      Buffer.from(kept),
      'both relays carry one secret',
    );
  });
});
