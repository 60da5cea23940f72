import type { Transaction } from 'kysely';
import type { EngineEvent } from '../domain/messages.ts';
import { storedMessageIds } from '../store/messages.ts';
import type { Database } from '../store/schema.ts';
import type { EventProjection } from './recorder.ts';

/** What one instance's batch in a transaction knows about its `message` events. */
interface BatchCopies {
  instanceId: string;
  /** The batch's message ids already stored before it began, each with its chat JID. */
  stored: ReadonlyMap<string, string>;
  /** The `chat/id` keys of the batch's `message` events applied so far. */
  seen: Set<string>;
  /** The `message` event being applied, and whether it is a copy. */
  current: { event: EngineEvent; copy: boolean } | undefined;
}

/**
 * Whether a stored message's chat `stored` (undefined: no such message) is the chat `chat` of a `message` event with
 * the same id. A chat kept as a LID (`…@lid`, one no mapping could turn into a phone JID when it was stored,
 * docs/decisions/0038-lid-mappings.md) cannot be compared with the phone JID a later mapping gives its copy, so either
 * side being a LID counts as the same chat: an id reused across chats is far rarer than a LID learned meanwhile.
 */
function sameChat(stored: string | undefined, chat: string): boolean {
  if (stored === undefined) return false;
  return stored === chat || stored.endsWith('@lid') || chat.endsWith('@lid');
}

/**
 * Tells the copies among recorded `message` events (docs/decisions/0024-engines-and-data-flow.md): the platform
 * hands a message over again (an acknowledgement lost when a socket dropped and the offline redelivery that follows,
 * stanzas left unacknowledged at a node hand-over, src/engines/baileys/quiesce.ts), and the message store keeps the
 * first copy only (src/store/messages.ts `insertMessages`). A copy is a `message` event whose id is a stored message
 * of the instance in the same chat when its batch begins, or the id and chat of an earlier `message` event of the same
 * batch (an id another chat reused is a new message, though the store keeps its first row only): it must not make
 * a second webhook event, sequence number or delivery (src/events/outbox-projection.ts), nor touch the peer again
 * (src/events/message-projection.ts). Any other event about a message (an edit, a deletion, a reaction, a receipt)
 * is not a copy, and neither is a `history` event.
 *
 * It reads the stored ids in its `prepare`: one statement for the batch's `message` events that may have come before
 * (`mayRepeat`, src/domain/events.ts: delivered offline after a connect, or first delivered undecryptable), none
 * for a batch without them; a message delivered live is new and costs no statement (a look-up for
 * every inbound batch took about 30 % off PostgreSQL's delivery rate, docs/decisions/0024-engines-and-data-flow.md).
 * A send's `message` event, recorded by its relay, is a first delivery: the send path keeps its statements. A message a history sync stored before the platform
 * delivered it offline (a first pairing) is a stored message: taken for a copy, it reaches webhooks in the
 * `HistorySync` event only. Message rows are never pruned, so a copy whose first event the log's retention already
 * dropped is still told. A `message` event a recorded write returns (`RecordedWrite`, src/events/recorder.ts) is not
 * looked up (no write returns one); a repeat within the batch is still told.
 *
 * Its `apply` decides for the event being applied, so it must be used before the projections that ask
 * {@link isCopy} (the recorder applies each event over the projections in the order they were added); one that asks
 * out of turn gets false, as if there were no copies.
 */
export class MessageCopies implements EventProjection {
  readonly name = 'message-copies';
  /** What each transaction (a part's view of one, on PostgreSQL) knows of the batch it is applying. */
  readonly #batches = new WeakMap<Transaction<Database>, BatchCopies>();
  /**
   * Reads which of the `message` ids of `events` are already stored (one statement; none when there is no id to
   * look up). A transaction holds one instance's batch at a time, so what an earlier batch left is replaced.
   * @throws the store's error (the recorder's transaction rolls back).
   */
  async prepare(
    trx: Transaction<Database>,
    instanceId: string,
    events: readonly EngineEvent[],
  ): Promise<void> {
    const ids: string[] = [];
    for (const event of events) {
      if (event.type !== 'message' || event.mayRepeat !== true) continue;
      ids.push(event.message.id);
    }
    const stored = await storedMessageIds(trx, instanceId, ids);
    this.#batches.set(trx, { instanceId, stored, seen: new Set(), current: undefined });
  }

  /** Decides whether `event`, a `message` event, is a copy (read by {@link isCopy} while it is applied). */
  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    if (event.type !== 'message') return;
    const batch = this.#batches.get(trx);
    if (batch === undefined || batch.instanceId !== instanceId) return;
    const { id, source } = event.message;
    const key = `${source.chat}/${id}`;
    batch.current = { event, copy: sameChat(batch.stored.get(id), source.chat) || batch.seen.has(key) };
    batch.seen.add(key);
  }

  /**
   * Whether `event`, being applied in `trx`, is a copy of a message recorded before it; false for any event but a
   * `message` one.
   */
  isCopy(trx: Transaction<Database>, event: EngineEvent): boolean {
    if (event.type !== 'message') return false;
    const current = this.#batches.get(trx)?.current;
    return current !== undefined && current.event === event && current.copy;
  }
}
