import { randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { DEFAULT_SUBSCRIPTION, type Instance } from '../domain/instance.ts';
import type { EngineEvent } from '../domain/messages.ts';
import { insertDelivery } from '../store/deliveries.ts';
import { getInstance } from '../store/instances.ts';
import type { Database } from '../store/schema.ts';
import { insertWebhookEvent, nextSequence } from '../store/webhook-events.ts';
import { normaliseEvent, webhookBody } from './normalise.ts';
import type { EventProjection } from './recorder.ts';

/** Options of the {@link OutboxProjection}. */
export interface OutboxProjectionOptions {
  clock: Clock;
  /** Attempts a new delivery gets (first try + retries of the configured schedule). */
  maxAttempts: number;
  /**
   * Called after a transaction that queued a delivery committed, with the event's instance id (wakes the
   * delivery worker). Not called for events that queued nothing (no URL, not subscribed, disabled). Must not
   * throw.
   */
  onCommitted: (instanceId: string) => void;
  /**
   * The absolute URL where parley serves the file of media message `messageId` of an instance (the webhook's
   * `event.media.url`); without it payloads carry no `media` link.
   */
  mediaUrl?: (instanceId: string, messageId: string) => string;
}

/**
 * The webhook outbox (docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0018-webhook-events-and-payloads.md): inside the recorder's transaction, normalises each
 * webhook-worthy engine event (docs/decisions/0018-webhook-events-and-payloads.md), gives it the instance's next
 * `sequence`, and writes the event row always ("events are still recorded for the delivery log") plus a delivery row
 * when a webhook URL is configured, the event type is subscribed (docs/api.md#webhook-events; a null subscription
 * means the default four types) and no 410 disabled the webhook. `connection` and `contacts` events are not webhook
 * events.
 */
export class OutboxProjection implements EventProjection {
  readonly name = 'webhook-outbox';
  readonly #options: OutboxProjectionOptions;
  /** Events whose transaction queued a delivery row; read (and forgotten) after the commit. */
  readonly #queued = new WeakSet<EngineEvent>();
  /** Instances read in a transaction, by transaction (forgotten with it). */
  readonly #read = new WeakMap<Transaction<Database>, Map<string, Instance | undefined>>();

  constructor(options: OutboxProjectionOptions) {
    this.#options = options;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    const { mediaUrl } = this.#options;
    const normalised = normaliseEvent(
      event,
      mediaUrl === undefined ? undefined : (messageId) => mediaUrl(instanceId, messageId),
    );
    if (!normalised) return;
    const instance = await this.#instance(trx, instanceId);
    if (!instance) return;
    const { sequence, disabledAt, disabledReason } = await nextSequence(trx, instanceId);
    const subscribed = (instance.subscribe ?? DEFAULT_SUBSCRIPTION).includes(normalised.type);
    let skipReason: string | null = null;
    if (instance.webhookUrl === null) skipReason = 'no webhook URL configured';
    else if (!subscribed) skipReason = `event type ${normalised.type} is not subscribed`;
    else if (disabledAt !== null)
      skipReason = `webhook disabled: ${disabledReason ?? 'receiver answered 410'}`;
    const id = randomUUID();
    const now = this.#options.clock();
    const createdAt = new Date(now).toISOString();
    await insertWebhookEvent(trx, {
      id,
      instanceId,
      sequence,
      type: normalised.type,
      payload: webhookBody(normalised, instanceId, sequence),
      skipReason,
      createdAt,
    });
    if (skipReason !== null) return;
    await insertDelivery(trx, {
      eventId: id,
      instanceId,
      sequence,
      maxAttempts: this.#options.maxAttempts,
      runAt: now,
      now: createdAt,
    });
    this.#queued.add(event);
  }

  /**
   * The instance's row, read once per transaction: the recorder applies a batch of an instance's events in one
   * transaction, and only the API changes the webhook URL and subscription an event is routed by.
   */
  async #instance(trx: Transaction<Database>, instanceId: string): Promise<Instance | undefined> {
    let read = this.#read.get(trx);
    if (!read) {
      read = new Map();
      this.#read.set(trx, read);
    }
    if (read.has(instanceId)) return read.get(instanceId);
    const instance = await getInstance(trx, instanceId);
    read.set(instanceId, instance);
    return instance;
  }

  afterCommit(instanceId: string, event: EngineEvent): void {
    if (this.#queued.delete(event)) this.#options.onCommitted(instanceId);
  }
}
