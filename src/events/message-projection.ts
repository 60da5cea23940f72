import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { LID_DOMAIN, type LidMapping, lidJid, lidOfJid } from '../domain/lids.ts';
import type { EngineEvent, EngineMessage, Jid } from '../domain/messages.ts';
import { phoneOfJid, userJid } from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import { advanceOrHoldReceipt } from '../store/held-receipts.ts';
import { keptPhoneJids } from '../store/lid-mappings.ts';
import { moveLidChatMessages } from '../store/lid-moves.ts';
import {
  advanceDeliveryState,
  applyMessageUpdate,
  insertMessagesWrites,
  type NewMessage,
  type PeerSighting,
  touchPeersWrites,
  voteMayCount,
} from '../store/messages.ts';
import type { Database } from '../store/schema.ts';
import { deferWrites, runWriteGroup, type TableWrites } from '../store/write-groups.ts';
import type { HeldReceipts } from './held-receipts.ts';
import type { MessageCopies } from './message-copies.ts';
import type { EventProjection } from './recorder.ts';

/**
 * The message store as a projection of engine events (docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0017-messages-and-media.md), applied in the recorder's transaction so a message row commits together
 * with its outbox row:
 * - `message`: stores the message — `sent` when the account sent it, `delivered` when it arrived — and records
 *   the user it was exchanged with (the chat's user, or the sender of a group message from someone else);
 * - `history`: the same for every message of the synced chats;
 * - `receipt`: moves the acknowledged messages of the receipt's chat forward (`delivered` → `read` → `played`),
 *   never backwards. In a group the first member's receipt moves the message (the platform's per-member receipts
 *   are not kept). With `held`, another user's receipt naming a send job still `pending` or `sending` (its message
 *   not recorded yet: its relay's ack was lost) is held for it and noted there, for the outbox to leave out until
 *   the job's message is recorded (docs/decisions/0104-receipts-before-their-send.md);
 * - `read`: moves the received messages the account read (in that chat, not its own) to `read`;
 * - `messageUpdate`: an edit replaces the stored text, a deletion for everyone drops it
 *   (docs/decisions/0026-chats-edits-polls-and-calls.md); one its message may not take (src/domain/messages.ts
 *   `updateMayChange`: not its sender's, in a group not an admin's, or the message deleted already) changes nothing
 *   and is told to `copies` (`MessageCopies.refuse`), so it makes no webhook event either; a group deletion whose
 *   sender's role the engine could not read (`unverified`) changes nothing either, but its event is made
 *   (docs/decisions/0106-unverified-group-deletions.md);
 * - `pollVote`: changes nothing stored; a vote that came in another chat than its poll's (src/store/messages.ts
 *   `voteMayCount`) is told to `copies` as refused, so it makes no webhook event, as a phone ignores it;
 * - `lid-mapping`: the messages kept under the LID chat of a pair, stored or buffered, move to its phone JID, the
 *   LID as a sender (a group member) is renamed to it, and the user becomes a peer under it with the name its
 *   messages carried (src/store/lid-moves.ts `moveLidChatMessages`).
 *
 * A LID and the phone JID of its kept pair are one chat (docs/decisions/0038-lid-mappings.md): a message naming a
 * LID whose pair the store keeps (an engine that did not know it) is stored under the phone JID, sender too, and a
 * receipt or read naming such a LID moves the messages of the phone JID's chat; so no message stays under a LID
 * once its pair is stored, and the chat routes find every message under the phone JID. Only events naming a LID
 * cost the look-up.
 *
 * Stored messages and peers are written in bulk: `message` and `history` events add their rows to the
 * transaction's buffer, which {@link flush} (called by the recorder once the batch is applied) puts into the
 * batch's write group as one multi-row insert each: on PostgreSQL both become clauses of the statement that writes
 * the outbox's event and delivery rows (docs/decisions/0056-write-groups.md). An event that reads or changes stored
 * messages (a receipt, a read, an edit) writes the buffer first, so it sees every message recorded before it.
 *
 * With `copies`, a `message` event that is a copy of one recorded before it (the platform handed the message over
 * again, src/events/message-copies.ts) is left out: its row is kept as first stored anyway, and its peer is not
 * touched again (a message redelivered long after does not make its sender a recent peer); so is a copy of a
 * `messageUpdate` (an edit applied again would set its time again).
 */
export class MessageProjection implements EventProjection {
  readonly name = 'messages';
  readonly #clock: Clock;
  /** What tells the copies of messages recorded before (used before this projection); none: no copy is told. */
  readonly #copies: MessageCopies | undefined;
  /** Rows buffered in a transaction, by transaction (forgotten with it). */
  readonly #buffers = new WeakMap<Transaction<Database>, Buffered>();
  /** Where the receipts held for sends not recorded yet are noted for the outbox; none: no receipt is held. */
  readonly #held: HeldReceipts | undefined;

  constructor(clock: Clock, copies?: MessageCopies, held?: HeldReceipts) {
    this.#clock = clock;
    this.#copies = copies;
    this.#held = held;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    const at = new Date(this.#clock()).toISOString();
    switch (event.type) {
      case 'message':
        if (this.#copies?.isCopy(trx, event)) return;
        // Most messages name no LID: buffered without a look-up or an await.
        if (!namesLid(event.message)) this.#buffer(trx, event.message, at);
        else
          for (const message of await keptMessages(trx, instanceId, [event.message]))
            this.#buffer(trx, message, at);
        return;
      case 'history':
        for (const message of await keptMessages(
          trx,
          instanceId,
          event.chats.flatMap((chat) => chat.messages),
        ))
          this.#buffer(trx, message, at);
        return;
      case 'receipt': {
        await this.#writeNow(trx, instanceId);
        // Only in the chat the receipt came from, and only messages of the side that was acknowledged (the
        // account's own when a peer acknowledged, the peer's when another device of the account read them): a
        // receipt naming ids of another chat changes nothing, as on a phone.
        const chat = isLid(event.source.chat)
          ? await keptChat(trx, instanceId, event.source.chat)
          : event.source.chat;
        if (this.#held === undefined || event.source.isFromMe) {
          await advanceDeliveryState(trx, instanceId, event.messageIds, event.state, at, {
            chat,
            fromMe: !event.source.isFromMe,
          });
          return;
        }
        // A peer's receipt naming a send whose message is not recorded yet is held for it (held-receipts.ts).
        const held = await advanceOrHoldReceipt(trx, instanceId, {
          ids: event.messageIds,
          state: event.state,
          source: event.source,
          timestamp: event.timestamp,
          chat,
          at,
        });
        this.#held.note(trx, event, held);
        return;
      }
      case 'read':
        await this.#writeNow(trx, instanceId);
        await advanceDeliveryState(trx, instanceId, event.messageIds, 'read', at, {
          chat: isLid(event.chat) ? await keptChat(trx, instanceId, event.chat) : event.chat,
          fromMe: false,
        });
        return;
      case 'messageUpdate': {
        if (this.#copies?.isCopy(trx, event)) return;
        await this.#writeNow(trx, instanceId);
        const outcome = await applyMessageUpdate(trx, instanceId, event.update);
        if (outcome === 'refused') this.#copies?.refuse(trx, event);
        return;
      }
      case 'pollVote': {
        if (this.#copies?.isCopy(trx, event)) return;
        await this.#writeNow(trx, instanceId);
        if (!(await voteMayCount(trx, instanceId, event.vote))) this.#copies?.refuse(trx, event);
        return;
      }
      case 'lid-mapping':
        this.#moveBuffered(trx, event.mappings);
        await moveLidChatMessages(trx, instanceId, event.mappings);
        return;
      default:
        return;
    }
  }

  /**
   * Puts the messages and peers buffered in `trx` (one multi-row insert each, oldest first) into the batch's write
   * group ({@link deferWrites}): written with the outbox's rows, or by the recorder at the batch's end, before the
   * commit (docs/decisions/0056-write-groups.md).
   * @throws RangeError when a buffered message's timestamp is not a time (the transaction then rolls back).
   */
  async flush(trx: Transaction<Database>, instanceId: string): Promise<void> {
    const writes = this.#take(trx, instanceId);
    if (writes !== undefined) deferWrites(trx, writes);
  }

  /** Writes the messages and peers buffered in `trx` now (an event about to read or change stored messages). */
  async #writeNow(trx: Transaction<Database>, instanceId: string): Promise<void> {
    const writes = this.#take(trx, instanceId);
    if (writes !== undefined) await runWriteGroup(trx, writes);
  }

  /** The writes of the rows buffered in `trx`, which it forgets; undefined when none are. */
  #take(trx: Transaction<Database>, instanceId: string): TableWrites[] | undefined {
    const buffered = this.#buffers.get(trx);
    if (!buffered || buffered.messages.length === 0) return undefined;
    this.#buffers.delete(trx);
    return [
      insertMessagesWrites(instanceId, buffered.messages, buffered.at),
      touchPeersWrites(instanceId, buffered.peers, buffered.at),
    ];
  }

  /**
   * Names the LIDs of `mappings` in the messages buffered in `trx` by their pairs' phone JIDs, chat and sender each
   * (a group member's LID too), as {@link moveLidChatMessages} does with the stored ones; a LID named twice keeps its
   * last pair. A renamed message that now makes a peer ({@link peerOf}: a user's chat, a member's group message)
   * adds it, with its name, as a message stored under the phone JID would have. The buffered objects are replaced,
   * not changed (other projections may hold them).
   */
  #moveBuffered(trx: Transaction<Database>, mappings: readonly LidMapping[]): void {
    const buffered = this.#buffers.get(trx);
    if (!buffered) return;
    const phoneOf = new Map<Jid, Jid>();
    for (const { lid, phone } of mappings) phoneOf.set(lidJid(lid), userJid(phone));
    buffered.messages = buffered.messages.map((row) => {
      const message = renamed(row.message, phoneOf);
      if (message === row.message) return row;
      const peer = peerOf(row.message) === null ? peerOf(message) : null;
      if (peer !== null) buffered.peers.push(peer);
      return extended(row, { message });
    });
  }

  /** Adds `message` (and the peer it was exchanged with) to the transaction's buffer. */
  #buffer(trx: Transaction<Database>, message: EngineMessage, at: string): void {
    let buffered = this.#buffers.get(trx);
    if (!buffered) {
      buffered = { at, messages: [], peers: [] };
      this.#buffers.set(trx, buffered);
    }
    buffered.messages.push({ message, state: message.source.isFromMe ? 'sent' : 'delivered' });
    const peer = peerOf(message);
    if (peer) buffered.peers.push(peer);
  }
}

/** Rows a transaction buffered for {@link MessageProjection.flush}; `at` (RFC 3339) is the first one's time. */
interface Buffered {
  at: string;
  messages: NewMessage[];
  peers: PeerSighting[];
}

/**
 * `messages` with each chat or sender naming a LID whose pair the store keeps named by the pair's phone JID
 * (docs/decisions/0038-lid-mappings.md); as they are, with no statement, when none names a LID.
 * @throws the store's error.
 */
async function keptMessages(
  trx: Transaction<Database>,
  instanceId: string,
  messages: readonly EngineMessage[],
): Promise<readonly EngineMessage[]> {
  if (!messages.some(namesLid)) return messages;
  const lids = messages.flatMap((message) => [message.source.chat, message.source.sender]).filter(isLid);
  const kept = await keptPhoneJids(trx, instanceId, lids);
  return kept.size === 0 ? messages : messages.map((message) => renamed(message, kept));
}

/** `chat`, or the phone JID of its kept pair when it is a LID the store keeps one for. @throws the store's error. */
async function keptChat(trx: Transaction<Database>, instanceId: string, chat: Jid): Promise<Jid> {
  if (!isLid(chat)) return chat;
  return (await keptPhoneJids(trx, instanceId, [chat])).get(chat) ?? chat;
}

/** True for a LID JID (`<digits>@lid`, a device part allowed). */
function isLid(jid: Jid): boolean {
  return jid.endsWith(`@${LID_DOMAIN}`) && lidOfJid(jid) !== null;
}

/** True when `message`'s chat or sender is a LID JID. */
function namesLid(message: EngineMessage): boolean {
  return isLid(message.source.chat) || isLid(message.source.sender);
}

/** `message` with its chat and sender renamed by `names` (JID → JID); the same object when neither is named. */
function renamed(message: EngineMessage, names: ReadonlyMap<Jid, Jid>): EngineMessage {
  const { chat, sender } = message.source;
  const newChat = names.get(chat) ?? chat;
  const newSender = names.get(sender) ?? sender;
  if (newChat === chat && newSender === sender) return message;
  return extended(message, { source: extended(message.source, { chat: newChat, sender: newSender }) });
}

/**
 * The user a message was exchanged with, if any: the other party of a one-to-one chat, or the sender of a group
 * message from someone else; its display name only when the message is the user's own. Non-user chats
 * (broadcast lists, status) have none.
 */
export function peerOf(message: EngineMessage): { jid: Jid; pushName: string } | null {
  const { chat, sender, isFromMe, isGroup } = message.source;
  if (isGroup && isFromMe) return null;
  const phone = phoneOfJid(isGroup ? sender : chat);
  if (phone === null) return null;
  return { jid: userJid(phone), pushName: isFromMe ? '' : message.pushName };
}
