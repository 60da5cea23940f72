/**
 * Poll votes: what the simulated phone encrypts (sim/messaging/polls.ts, the inverse of Baileys' decryptPollVote)
 * the live engine decrypts back to option names (src/engines/baileys/polls.ts), whichever JID forms were used;
 * a wrong secret or JID gives nothing.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { encryptVote } from '../../sim/messaging/polls.ts';
import { decryptVote, loadPollSecret, savePollSecret } from '../../src/engines/baileys/polls.ts';
import type { AuthStateStore } from '../../src/engines/engine.ts';

const SHOP = '5511999990000@s.whatsapp.net';
const SHOP_LID = '900000000000001@lid';
const ANA = '5511988887777@s.whatsapp.net';
const ANA_LID = '900000000000002@lid';

function memoryAuth(): AuthStateStore {
  const data = new Map<string, string>();
  return {
    async get(category, ids) {
      const out = new Map<string, string>();
      for (const id of ids) {
        const value = data.get(`${category}/${id}`);
        if (value !== undefined) out.set(id, value);
      }
      return out;
    },
    async set(entries) {
      for (const { category, id, value } of entries) {
        if (value === null) data.delete(`${category}/${id}`);
        else data.set(`${category}/${id}`, value);
      }
    },
    async list() {
      return new Map();
    },
    async clear() {
      data.clear();
    },
  };
}

describe('poll votes (live engine)', () => {
  const poll = {
    id: '3EB0AABBCCDDEEFF001122',
    secret: randomBytes(32),
    name: 'Day?',
    options: ['Mon', 'Tue', 'Fri'],
  };

  it('decrypts a vote to the option names in poll order, with phone or LID JIDs on either side', () => {
    for (const [creatorJid, voterJid] of [
      [SHOP, ANA],
      [SHOP_LID, ANA_LID],
      [SHOP, ANA_LID],
    ] as const) {
      const vote = encryptVote(poll, { pollId: poll.id, creatorJid, voterJid }, ['Fri', 'Mon']);
      assert.deepEqual(decryptVote(vote, poll, [SHOP, SHOP_LID], [ANA, ANA_LID]), ['Mon', 'Fri']);
    }
    const withdrawn = encryptVote(poll, { pollId: poll.id, creatorJid: SHOP, voterJid: ANA }, []);
    assert.deepEqual(decryptVote(withdrawn, poll, [SHOP], [ANA]), []);
  });

  it('gives nothing for a wrong secret, poll id or voter', () => {
    const vote = encryptVote(poll, { pollId: poll.id, creatorJid: SHOP, voterJid: ANA }, ['Tue']);
    assert.equal(decryptVote(vote, { ...poll, secret: randomBytes(32) }, [SHOP], [ANA]), undefined);
    assert.equal(decryptVote(vote, { ...poll, id: 'OTHER' }, [SHOP], [ANA]), undefined);
    assert.equal(decryptVote(vote, poll, [SHOP], ['5511977776666@s.whatsapp.net']), undefined);
    assert.equal(decryptVote({}, poll, [SHOP], [ANA]), undefined);
  });

  it('keeps the secret, question and options of a sent poll in the auth store', async () => {
    const auth = memoryAuth();
    assert.equal(await loadPollSecret(auth, poll.id), undefined);
    await savePollSecret(auth, poll.id, poll);
    const loaded = await loadPollSecret(auth, poll.id);
    assert.deepEqual(loaded, { secret: poll.secret, name: 'Day?', options: ['Mon', 'Tue', 'Fri'] });
  });
});
