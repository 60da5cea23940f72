import type { FastifyBaseLogger } from 'fastify';
import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { type EngineEvent, eventLogFields } from '../domain/messages.ts';
import { storedMessageIds } from '../store/messages.ts';
import { recordedUpdateIds, recordUpdateIdsWrites } from '../store/recorded-updates.ts';
import type { Database } from '../store/schema.ts';
import { deferWrites } from '../store/write-groups.ts';
import type { EventProjection } from './recorder.ts';

/**
 * An edit, a deletion or a poll vote (an event about a message carried by a platform message of its own), a change
 * of a group (carried by a platform notification), or a step of a call (carried by a platform call notification).
 */
type UpdateEvent = Extract<EngineEvent, { type: 'messageUpdate' | 'pollVote' | 'group' | 'call' }>;

/** True for the events {@link UpdateEvent} names. */
function isUpdate(event: EngineEvent): event is UpdateEvent {
  return (
    event.type === 'messageUpdate' ||
    event.type === 'pollVote' ||
    event.type === 'group' ||
    event.type === 'call'
  );
}

/** What one instance's batch in a transaction knows about its `message` and update events. */
interface BatchCopies {
  instanceId: string;
  /** The batch's message ids already stored before it began, each with its chat JID. */
  stored: ReadonlyMap<string, string>;
  /** The `chat/id` keys of the batch's `message` events applied so far. */
  seen: Set<string>;
  /** The batch's update ids (`platformId`) recorded before it began. */
  recordedUpdates: ReadonlySet<string>;
  /** The update ids of the batch's update events applied so far. */
  seenUpdates: Set<string>;
  /** The update ids first seen in this batch, not yet written ({@link MessageCopies.flush}). */
  newUpdates: string[];
  /** The event being applied: whether it is a copy, and whether the message store refused it (an update). */
  current: { event: EngineEvent; copy: boolean; refused: boolean } | undefined;
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
 * Tells the copies among recorded `message` and update events (docs/decisions/0024-engines-and-data-flow.md): the
 * platform hands a message over again (an acknowledgement lost when a socket dropped and the offline redelivery that
 * follows, a message whose first delivery could not be decrypted and is resent, stanzas left unacknowledged at a node
 * hand-over, src/engines/baileys/quiesce.ts), and the message store keeps the first copy only
 * (src/store/messages.ts `insertMessages`). A copy is a `message` event whose id is a stored message
 * of the instance in the same chat when its batch begins, or the id and chat of an earlier `message` event of the same
 * batch (an id another chat reused is a new message, though the store keeps its first row only): it must not make
 * a second webhook event, sequence number or delivery (src/events/outbox-projection.ts), nor touch the peer again
 * (src/events/message-projection.ts). An edit, a deletion for everyone and a poll vote come in platform messages of
 * their own, handed over again alike: such an event carrying the platform message's id (`platformId`) is a copy when
 * that id is among the instance's recorded updates (`recorded_updates`, src/store/recorded-updates.ts) when its batch
 * begins, or an earlier update event of the batch carried it; the id of every other one is written with the batch
 * ({@link flush}), in its transaction, so an update is recorded once, a crash between the two being impossible. A
 * change of a group comes in a platform notification, handed over again alike: its `group` event carries the
 * notification's id and its place in it as its `platformId`, and is told as an update. So is a step of a call
 * (`call/<call id>/offer` or `call/<call id>/end`): the live engine remembers a call's steps in memory too, but a
 * process started since does not. A reaction is a `message` of its own id; a receipt is not a copy, and neither is a
 * `history` event.
 *
 * It reads the stored ids in its `prepare`: one statement for the batch's `message` events that may have come before
 * (`mayRepeat`, src/domain/events.ts: delivered offline after a connect, or first delivered undecryptable), none
 * for a batch without them; a message delivered live is new and costs no statement (a look-up for
 * every inbound batch took about 30 % off PostgreSQL's delivery rate, docs/decisions/0024-engines-and-data-flow.md).
 * Updates are rare beside messages, and a repeated one comes live as well (its first delivery undecryptable), so
 * a batch holding update events with a `platformId` costs one statement more, whatever their delivery.
 * A send's `message` event, recorded by its relay, is a first delivery: the send path keeps its statements. A message
 * a history sync stored before the platform delivered it offline (a first pairing) is a stored message: taken for a
 * copy, it reaches webhooks in the `HistorySync` event only. Message rows are never pruned, so a copy whose first
 * event the log's retention already dropped is still told. A `message` event a recorded write returns
 * (`RecordedWrite`, src/events/recorder.ts) is not looked up (no write returns one); a repeat within the batch is
 * still told.
 *
 * Its `apply` decides for the event being applied, so it must be used before the projections that ask
 * {@link isCopy} or {@link isLeftOut} (the recorder applies each event over the projections in the order they were
 * added); one that asks out of turn gets false, as if there were no copies. The message projection tells it of an
 * update the message store refused ({@link refuse}: an edit or deletion its message's sender did not make,
 * src/domain/messages.ts `updateMayChange`, or a poll vote from another chat than its poll's, src/store/messages.ts
 * `voteMayCount`), which is left out too, and logged once committed.
 */
export class MessageCopies implements EventProjection {
  readonly name = 'message-copies';
  readonly #clock: Clock;
  readonly #logger: FastifyBaseLogger | undefined;
  /** What each transaction (a part's view of one, on PostgreSQL) knows of the batch it is applying. */
  readonly #batches = new WeakMap<Transaction<Database>, BatchCopies>();
  /** Updates left out in a transaction, logged after its commit ({@link afterCommit}). */
  readonly #leftOut = new WeakMap<EngineEvent, 'copy' | 'refused'>();

  /**
   * @param clock the time written with a recorded update's id (epoch ms). @param logger where an update left out is
   *   logged (none: not logged).
   */
  constructor(clock: Clock = Date.now, logger?: FastifyBaseLogger) {
    this.#clock = clock;
    this.#logger = logger;
  }

  /**
   * Reads which of the `message` ids and the update ids of `events` are already stored (one statement each; none
   * when there is no id to look up). A transaction holds one instance's batch at a time, so what an earlier batch
   * left is replaced.
   * @throws the store's error (the recorder's transaction rolls back).
   */
  async prepare(
    trx: Transaction<Database>,
    instanceId: string,
    events: readonly EngineEvent[],
  ): Promise<void> {
    const ids: string[] = [];
    const updateIds: string[] = [];
    for (const event of events) {
      if (event.type === 'message' && event.mayRepeat === true) ids.push(event.message.id);
      else if (isUpdate(event) && event.platformId !== undefined) updateIds.push(event.platformId);
    }
    const stored = await storedMessageIds(trx, instanceId, ids);
    const recordedUpdates = await recordedUpdateIds(trx, instanceId, updateIds);
    this.#batches.set(trx, {
      instanceId,
      stored,
      seen: new Set(),
      recordedUpdates,
      seenUpdates: new Set(),
      newUpdates: [],
      current: undefined,
    });
  }

  /** Decides whether `event`, a `message` or an update event, is a copy (read by {@link isCopy} while applied). */
  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    if (event.type !== 'message' && !isUpdate(event)) return;
    const batch = this.#batches.get(trx);
    if (batch === undefined || batch.instanceId !== instanceId) return;
    if (event.type === 'message') {
      const { id, source } = event.message;
      const key = `${source.chat}/${id}`;
      const copy = sameChat(batch.stored.get(id), source.chat) || batch.seen.has(key);
      batch.current = { event, copy, refused: false };
      batch.seen.add(key);
      return;
    }
    const id = event.platformId;
    let copy = false;
    if (id !== undefined) {
      copy = batch.recordedUpdates.has(id) || batch.seenUpdates.has(id);
      if (!copy) {
        batch.seenUpdates.add(id);
        batch.newUpdates.push(id);
      }
    }
    batch.current = { event, copy, refused: false };
    // What a transaction that rolled back decided for the same event is forgotten.
    if (copy) this.#leftOut.set(event, 'copy');
    else this.#leftOut.delete(event);
  }

  /**
   * Puts the insert of the update ids the batch recorded into its write group (`deferWrites`, written with its event
   * rows before the commit, docs/decisions/0056-write-groups.md); nothing when it recorded none.
   */
  async flush(trx: Transaction<Database>, instanceId: string): Promise<void> {
    const batch = this.#batches.get(trx);
    if (batch === undefined || batch.instanceId !== instanceId || batch.newUpdates.length === 0) return;
    deferWrites(trx, [recordUpdateIdsWrites(instanceId, batch.newUpdates, this.#clock())]);
    batch.newUpdates = [];
  }

  /**
   * Whether `event`, being applied in `trx`, is a copy of a message or an update recorded before it; false for any
   * other event.
   */
  isCopy(trx: Transaction<Database>, event: EngineEvent): boolean {
    const current = this.#batches.get(trx)?.current;
    return current !== undefined && current.event === event && current.copy;
  }

  /**
   * Marks `event`, an update being applied in `trx`, refused by the message store (it may not change its message):
   * {@link isLeftOut} is then true for it, and it is logged once committed.
   */
  refuse(trx: Transaction<Database>, event: EngineEvent): void {
    const current = this.#batches.get(trx)?.current;
    if (current === undefined || current.event !== event) return;
    current.refused = true;
    this.#leftOut.set(event, 'refused');
  }

  /**
   * Whether `event`, being applied in `trx`, makes no webhook event: a copy ({@link isCopy}) or an update the message
   * store refused ({@link refuse}).
   */
  isLeftOut(trx: Transaction<Database>, event: EngineEvent): boolean {
    const current = this.#batches.get(trx)?.current;
    return current !== undefined && current.event === event && (current.copy || current.refused);
  }

  /** Logs an update left out (its type and ids, no body, docs/decisions/0023-operations.md). */
  afterCommit(instanceId: string, event: EngineEvent): void {
    const why = this.#leftOut.get(event);
    if (why === undefined) return;
    this.#leftOut.delete(event);
    const fields = {
      instanceId,
      ...eventLogFields(event),
      platformId: isUpdate(event) ? event.platformId : undefined,
    };
    if (why === 'copy') this.#logger?.debug(fields, 'an update the platform handed over again; left out');
    else if (event.type === 'pollVote')
      this.#logger?.warn(fields, 'a poll vote that came in another chat than its poll; dropped');
    else
      this.#logger?.warn(
        fields,
        'an edit or deletion of a deleted message, or of one its sender did not send in that chat (in a group: ' +
          'by a member who is not an admin); dropped',
      );
  }
}
