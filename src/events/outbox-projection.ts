import type { Kysely, Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { DEFAULT_SUBSCRIPTION } from '../domain/instance.ts';
import type { EngineEvent } from '../domain/messages.ts';
import { insertDeliveriesWrites, type NewDelivery } from '../store/deliveries.ts';
import { routeAndAdvance } from '../store/instance-routing.ts';
import { newRowId } from '../store/row-ids.ts';
import type { Database } from '../store/schema.ts';
import {
  eventKeptAfterLostCommit,
  insertWebhookEventsWrites,
  type NewWebhookEvent,
} from '../store/webhook-events.ts';
import { deferWrites } from '../store/write-groups.ts';
import type { HeldReceipts } from './held-receipts.ts';
import type { MessageCopies } from './message-copies.ts';
import { type NormalisedEvent, normaliseEvent, webhookBody } from './normalise.ts';
import type { EventProjection } from './recorder.ts';

/** Options of the {@link OutboxProjection}. */
export interface OutboxProjectionOptions {
  /** The business clock, epoch ms: the events' and deliveries' `created_at`. */
  clock: Clock;
  /**
   * The store's clock, epoch ms: a new delivery is due (`run_at`) at its now, on the clock every node's claims judge
   * due times on (docs/decisions/0005-outbox-and-delivery.md, "Due times"; the worker's `dueNow`). Default `clock`.
   */
  dueClock?: Clock;
  /** Attempts a new delivery gets (first try + retries of the configured schedule). */
  maxAttempts: number;
  /**
   * Called after a transaction that queued a delivery committed, with the event's instance id (wakes the
   * delivery worker). Not called for events that queued nothing (no URL, not subscribed, disabled). Must not
   * throw.
   */
  onCommitted: (instanceId: string, endpointIds: readonly string[]) => void;
  /**
   * The absolute URL where parley serves the file of media message `messageId` of an instance (the webhook's
   * `event.media.url`); without it payloads carry no `media` link.
   */
  mediaUrl?: (instanceId: string, messageId: string) => string;
  /**
   * What tells the copies of messages and updates recorded before, and the updates the message store refused
   * (src/events/message-copies.ts), used before this projection; without it every event makes a webhook event.
   */
  copies?: MessageCopies;
  /**
   * Which ids of a `receipt` event the message projection held for a send not recorded yet
   * (src/events/held-receipts.ts), used before this projection: left out of its `ReadReceipt`, which is not written
   * when it names none left (docs/decisions/0104-receipts-before-their-send.md). Without it every receipt is
   * reported as it came.
   */
  held?: HeldReceipts;
}

/**
 * The webhook outbox (docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0018-webhook-events-and-payloads.md): inside the recorder's transaction, normalises each
 * webhook-worthy engine event (docs/decisions/0018-webhook-events-and-payloads.md), gives it the instance's next
 * `sequence`, and writes the event row always ("events are still recorded for the delivery log") plus a delivery row
 * when a webhook URL is configured, the event type is subscribed (docs/api.md#webhook-events; a null subscription
 * means the default four types) and no 410 disabled the webhook, plus one delivery row per enabled endpoint whose
 * `events` include the type (docs/decisions/0035-webhook-endpoints.md). `connection` and `contacts` events are not webhook
 * events. A `message`, edit, deletion or vote event that is a copy of one recorded before it (`copies`: the platform
 * handed the message over again, src/events/message-copies.ts) makes no event row, sequence number or delivery: a
 * receiver is told of a message once (docs/decisions/0024-engines-and-data-flow.md); nor does an edit or deletion the
 * message store refused (`MessageCopies.refuse`: not its message's sender's,
 * docs/decisions/0026-chats-edits-polls-and-calls.md).
 *
 * The rows are written at the end of the recorder's batch ({@link flush}): `apply` keeps each normalised event in the
 * transaction's buffer, and `flush` takes the batch's sequence numbers with what routes them (the state row's lock
 * is held from there to the commit, not from the first event; the routing is read again only when the store says
 * it changed, docs/decisions/0065-routing-version.md), then inserts the event rows and the delivery rows in one
 * multi-row statement each, in the order the events were applied, with the batch's messages in the write group the
 * recorder runs last. On PostgreSQL the group is one statement (docs/decisions/0056-write-groups.md), and the
 * group's commit leaves behind it (docs/decisions/0063-pipelined-commit.md).
 */
export class OutboxProjection implements EventProjection {
  readonly name = 'webhook-outbox';
  readonly #options: OutboxProjectionOptions;
  /**
   * Events whose transaction queued a delivery row, with the endpoints of those rows (`''` the default webhook);
   * read (and forgotten) after the commit.
   */
  readonly #queued = new WeakMap<EngineEvent, string[]>();
  /** Events applied in a transaction and not yet written, by transaction (forgotten with it). */
  readonly #buffers = new WeakMap<
    Transaction<Database>,
    { event: EngineEvent; normalised: NormalisedEvent }[]
  >();

  /** The first event row each transaction wrote (its instance and id), by transaction: what tells whether it committed. */
  readonly #written = new WeakMap<Transaction<Database>, { instanceId: string; id: string }>();

  constructor(options: OutboxProjectionOptions) {
    this.#options = options;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    const { mediaUrl, copies, held } = this.#options;
    if (copies?.isLeftOut(trx, event)) return;
    // A receipt held for a send not recorded yet is reported after the send's message (held-receipts.ts).
    const reported = held === undefined ? event : held.reported(trx, event);
    if (reported === undefined) return;
    const normalised = normaliseEvent(
      reported,
      mediaUrl === undefined ? undefined : (messageId) => mediaUrl(instanceId, messageId),
    );
    if (!normalised) return;
    let buffered = this.#buffers.get(trx);
    if (!buffered) {
      buffered = [];
      this.#buffers.set(trx, buffered);
    }
    buffered.push({ event, normalised });
  }

  /**
   * Takes the sequence numbers of the events `apply` buffered in `trx` and puts their event rows and delivery rows
   * into the batch's write group (`deferWrites`), which the recorder runs at the batch's end
   * (docs/decisions/0005-outbox-and-delivery.md, docs/decisions/0056-write-groups.md).
   * @throws the store's error (the recorder's transaction then rolls back).
   */
  async flush(trx: Transaction<Database>, instanceId: string): Promise<void> {
    const buffered = this.#buffers.get(trx);
    if (!buffered || buffered.length === 0) return;
    this.#buffers.delete(trx);
    const routing = await routeAndAdvance(trx, instanceId, buffered.length);
    // The instance is gone: nothing to route its events by, and no number was taken.
    if (!routing) return;
    const { last, disabledAt, disabledReason, instance } = routing;
    const endpoints = routing.endpoints.filter((endpoint) => endpoint.enabled);
    const createdAt = new Date(this.#options.clock()).toISOString();
    // Due now on the store's clock: on this node's wall clock, running ahead, a new event waited out the skew.
    const dueAt = (this.#options.dueClock ?? this.#options.clock)();
    const events: NewWebhookEvent[] = [];
    const deliveries: NewDelivery[] = [];
    for (const [index, { event, normalised }] of buffered.entries()) {
      const sequence = last - buffered.length + 1 + index;
      const subscribed = (instance.subscribe ?? DEFAULT_SUBSCRIPTION).includes(normalised.type);
      let skipReason: string | null = null;
      if (instance.webhookUrl === null) skipReason = 'no webhook URL configured';
      else if (!subscribed) skipReason = `event type ${normalised.type} is not subscribed`;
      else if (disabledAt !== null)
        skipReason = `webhook disabled: ${disabledReason ?? 'receiver answered 410'}`;
      const id = newRowId();
      events.push({
        id,
        instanceId,
        sequence,
        type: normalised.type,
        payload: webhookBody(normalised, instanceId, sequence),
        skipReason,
        createdAt,
      });
      // One delivery per enabled endpoint subscribed to the type (docs/decisions/0035-webhook-endpoints.md).
      for (const endpoint of endpoints) {
        if (!endpoint.events.includes(normalised.type)) continue;
        deliveries.push({
          eventId: id,
          endpointId: endpoint.id,
          instanceId,
          sequence,
          maxAttempts: this.#options.maxAttempts,
          runAt: dueAt,
          now: createdAt,
        });
        this.#lane(event, endpoint.id);
      }
      if (skipReason !== null) continue;
      deliveries.push({
        eventId: id,
        instanceId,
        sequence,
        maxAttempts: this.#options.maxAttempts,
        runAt: dueAt,
        now: createdAt,
      });
      this.#lane(event, '');
    }
    // Written with the batch's messages in its write group at the batch's end, the transaction's last statement
    // when the batch has one of its own (docs/decisions/0056-write-groups.md, 0063-pipelined-commit.md).
    deferWrites(trx, [insertWebhookEventsWrites(events), insertDeliveriesWrites(deliveries)]);
    const first = events[0];
    if (first !== undefined && !this.#written.has(trx)) this.#written.set(trx, { instanceId, id: first.id });
  }

  /**
   * Whether `trx`, whose commit answer was lost, was committed: its first event row is in the store, read once no
   * transaction holds its instance's sequence any more (`eventKeptAfterLostCommit`: the commit may still be running).
   */
  async keptAfterLostCommit(db: Kysely<Database>, trx: Transaction<Database>): Promise<boolean | undefined> {
    const written = this.#written.get(trx);
    if (written === undefined) return undefined;
    return eventKeptAfterLostCommit(db, written.instanceId, written.id);
  }

  /** Notes that `event` queued a delivery to endpoint `endpointId` (`''`: the default webhook). */
  #lane(event: EngineEvent, endpointId: string): void {
    const lanes = this.#queued.get(event);
    if (lanes === undefined) this.#queued.set(event, [endpointId]);
    else lanes.push(endpointId);
  }

  afterCommit(instanceId: string, event: EngineEvent): void {
    const lanes = this.#queued.get(event);
    if (lanes === undefined) return;
    this.#queued.delete(event);
    this.#options.onCommitted(instanceId, lanes);
  }
}
