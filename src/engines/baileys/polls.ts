import { createHash } from 'node:crypto';
import { type BinaryNode, decryptPollVote, type proto } from 'baileys';
import type { AuthStateStore } from '../engine.ts';

/**
 * Polls on the live engine (docs/decisions/0026-chats-edits-polls-and-calls.md). WhatsApp encrypts each vote with a
 * key derived from the poll's `messageContextInfo.messageSecret` (32 random bytes Baileys' `generateWAMessageContent`
 * puts on the poll), so the secret of every poll the account sends is kept — sealed, in the engine's auth store
 * (docs/decisions/0020-security-promises.md) — with the poll's question and option names, to decrypt incoming
 * `pollUpdateMessage`s and map the chosen options' SHA-256 digests back to their names (Baileys
 * Utils/process-message.js `decryptPollVote`, Utils/messages.js `getAggregateVotesInPollMessage`).
 */

/** Auth-store category of poll secrets; the id is the poll's message id. */
export const POLL_SECRETS = 'poll-secrets';

/** The `<meta polltype="creation"/>` child Baileys' `sendMessage` adds to a poll's stanza. */
export const POLL_CREATION_META: BinaryNode = { tag: 'meta', attrs: { polltype: 'creation' } };

/** What is kept of a sent poll: its 32-byte secret, question and option names in order. */
export interface PollSecret {
  secret: Buffer;
  name: string;
  options: readonly string[];
}

/** Stores the secret of poll `id`. */
export async function savePollSecret(auth: AuthStateStore, id: string, poll: PollSecret): Promise<void> {
  const value = JSON.stringify({
    secret: poll.secret.toString('base64'),
    name: poll.name,
    options: poll.options,
  });
  await auth.set([{ category: POLL_SECRETS, id, value }]);
}

/** The stored secret of poll `id`, or undefined when the account did not send it (or logged out since). */
export async function loadPollSecret(auth: AuthStateStore, id: string): Promise<PollSecret | undefined> {
  const stored = (await auth.get(POLL_SECRETS, [id])).get(id);
  if (stored === undefined) return undefined;
  const parsed = JSON.parse(stored) as { secret: string; name: string; options: string[] };
  return { secret: Buffer.from(parsed.secret, 'base64'), name: parsed.name, options: parsed.options };
}

/** SHA-256 of an option name: how a vote names an option (`PollVoteMessage.selectedOptions`). */
export function optionHash(name: string): Buffer {
  return createHash('sha256').update(name, 'utf8').digest();
}

/**
 * Decrypts a vote on `poll` and returns the chosen option names, in the poll's order. The key derivation binds
 * the poll id, the poll creator's JID and the voter's JID; which form of each JID (phone or LID) the voter's app
 * used is not in the stanza, so every candidate pair is tried (the GCM tag tells the right one).
 * @returns undefined when no candidate decrypts it.
 */
export function decryptVote(
  vote: proto.Message.IPollEncValue,
  poll: PollSecret & { id: string },
  creators: readonly string[],
  voters: readonly string[],
): string[] | undefined {
  if (!vote.encPayload || !vote.encIv) return undefined;
  const enc = { encPayload: vote.encPayload, encIv: vote.encIv };
  for (const pollCreatorJid of creators) {
    for (const voterJid of voters) {
      let decrypted: proto.Message.PollVoteMessage;
      try {
        decrypted = decryptPollVote(enc, {
          pollCreatorJid,
          pollMsgId: poll.id,
          pollEncKey: poll.secret,
          voterJid,
        });
      } catch {
        continue;
      }
      const chosen = (decrypted.selectedOptions ?? []).map((hash) => Buffer.from(hash));
      return poll.options.filter((name) => chosen.some((hash) => hash.equals(optionHash(name))));
    }
  }
  return undefined;
}
