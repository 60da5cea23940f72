import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import { type DomainError, errors } from '../domain/errors.ts';
import { DEFAULT_SUBSCRIPTION, type EventType, type Instance } from '../domain/instance.ts';
import { OutboundError, type OutboundGuard } from '../net/outbound-guard.ts';
import { nowIso, type Store } from '../store/database.ts';
import { requeueDelivery } from '../store/deliveries.ts';
import { tellInstancesWritten } from '../store/instance-writes.ts';
import { updateInstance } from '../store/instances.ts';
import { enableWebhook, getWebhookState, webhookEventExists } from '../store/webhook-events.ts';
import { type LogQuery, listLog } from '../store/webhook-log.ts';
import { type DeliveryView, decodeCursor, encodeCursor, toDeliveryView } from '../webhooks/log.ts';
import type { DeliveryWorker } from '../webhooks/worker.ts';

/**
 * An instance's webhook configuration (docs/api.md#webhook, docs/decisions/0005-outbox-and-delivery.md); `disabledAt`
 * is RFC 3339 or null.
 */
export interface WebhookConfig {
  webhook: string;
  subscribe: EventType[];
  disabled: boolean;
  disabledAt: string | null;
  disabledReason: string | null;
}

/** One page of the delivery log, newest first, and the cursor of the next page (null on the last). */
export interface DeliveryPage {
  deliveries: DeliveryView[];
  nextCursor: string | null;
}

/**
 * The refusal of a webhook URL the outbound guard refuses (docs/decisions/0001-envelope-and-error-codes.md,
 * docs/decisions/0020-security-promises.md). Built from the error's caller-safe `publicMessage` only: the detailed
 * `message` (resolved addresses, address classes, resolver codes) would let a caller map internal host names, so it
 * goes to the server log instead.
 */
function refusal(error: OutboundError, field: string): DomainError {
  if (
    error.reason === 'scheme' ||
    (error.reason === 'invalid-url' && error.publicMessage === 'URL is not valid')
  ) {
    return errors.badRequest(`${field} must be an HTTPS URL`);
  }
  if (error.reason === 'invalid-url') {
    return errors.badRequest(`${field} must be an HTTPS URL: ${error.publicMessage}`);
  }
  return errors.badRequest(`${field} is refused: ${error.publicMessage}`);
}

/**
 * Checks a receiver URL with the outbound guard (HTTPS, a public address: docs/decisions/0020-security-promises.md),
 * as `POST /v1/webhook` does; the default webhook and every endpoint (docs/decisions/0035-webhook-endpoints.md).
 * @returns the normalised URL.
 * @throws DomainError invalid `<field> must be an HTTPS URL…` / `<field> is refused: …` (the detail is logged on
 *   `log`, never answered).
 */
export async function checkReceiverUrl(
  guard: Pick<OutboundGuard, 'parseUrl' | 'checkHost'>,
  rawUrl: string,
  field: string,
  log: FastifyBaseLogger,
  instanceId: string,
): Promise<string> {
  try {
    const url = guard.parseUrl(rawUrl);
    await guard.checkHost(url);
    return url.href;
  } catch (error) {
    if (error instanceof OutboundError) {
      log.info({ err: error, reason: error.reason, instanceId }, 'webhook URL refused by the outbound guard');
      throw refusal(error, field);
    }
    throw error;
  }
}

/**
 * A page request of a delivery log (docs/decisions/0005-outbox-and-delivery.md): `limit` entries (1 to 100), only
 * `status`, before `cursor` (the previous page's `nextCursor`), only the event `types`.
 */
export interface DeliveriesServiceQuery {
  limit: number;
  status?: LogQuery['status'];
  cursor?: string | undefined;
  types?: readonly EventType[];
}

/**
 * The webhook family (docs/api.md#webhook, docs/decisions/0005-outbox-and-delivery.md): configuration, the delivery
 * log and redelivery.
 */
export class WebhookService {
  readonly #store: Store;
  readonly #guard: OutboundGuard;
  readonly #worker: DeliveryWorker;
  readonly #clock: Clock;

  constructor(deps: { store: Store; guard: OutboundGuard; worker: DeliveryWorker; clock: Clock }) {
    this.#store = deps.store;
    this.#guard = deps.guard;
    this.#worker = deps.worker;
    this.#clock = deps.clock;
  }

  /**
   * The instance's URL, subscription (a null one reads as all four types, docs/decisions/0016-session-lifecycle.md)
   * and disabled state.
   */
  async config(instance: Instance): Promise<WebhookConfig> {
    const state = await getWebhookState(this.#store.db, instance.id);
    return {
      webhook: instance.webhookUrl ?? '',
      subscribe: instance.subscribe ?? [...DEFAULT_SUBSCRIPTION],
      disabled: state.disabledAt !== null,
      disabledAt: state.disabledAt,
      disabledReason: state.disabledReason,
    };
  }

  /**
   * Sets the webhook URL after the outbound guard accepted it (HTTPS, a public address:
   * docs/decisions/0020-security-promises.md) and re-enables a webhook a 410 disabled, in one transaction; then wakes
   * the delivery worker.
   * @returns the normalised URL.
   * @throws DomainError invalid `webhookUrl must be an HTTPS URL…` / `webhookUrl is refused: …` (the detail is
   *   logged on `log`, never answered).
   */
  async setUrl(instance: Instance, rawUrl: string, log: FastifyBaseLogger): Promise<string> {
    const href = await checkReceiverUrl(this.#guard, rawUrl, 'webhookUrl', log, instance.id);
    try {
      await this.#store.db.transaction().execute(async (trx) => {
        await updateInstance(trx, instance.id, { webhookUrl: href });
        await enableWebhook(trx, instance.id, this.#clock());
      });
    } finally {
      tellInstancesWritten(this.#store.db);
    }
    this.#worker.wake();
    return href;
  }

  /** Removes the URL: later events are logged as unsent (redeliverable); queued deliveries wait for a new URL. */
  async removeUrl(instance: Instance): Promise<void> {
    await updateInstance(this.#store.db, instance.id, { webhookUrl: null });
  }

  /**
   * One page of the delivery log (docs/decisions/0005-outbox-and-delivery.md), newest first: `limit` entries before
   * `cursor`, optionally of one status; with `endpointId`, that endpoint's deliveries only
   * (docs/decisions/0035-webhook-endpoints.md). @throws DomainError invalid `cursor is invalid`.
   */
  async deliveries(
    instance: Instance,
    query: DeliveriesServiceQuery & { endpointId?: string },
  ): Promise<DeliveryPage> {
    const { limit, status, cursor, endpointId, types } = query;
    const beforeSequence = cursor === undefined ? undefined : decodeCursor(cursor);
    const entries = await listLog(this.#store.db, instance.id, {
      limit: limit + 1,
      ...(status === undefined ? {} : { status }),
      ...(beforeSequence === undefined ? {} : { beforeSequence }),
      ...(endpointId === undefined ? {} : { endpointId }),
      ...(types === undefined ? {} : { types }),
    });
    const page = entries.slice(0, limit);
    const last = page[page.length - 1];
    return {
      deliveries: page.map(toDeliveryView),
      nextCursor: entries.length > limit && last ? encodeCursor(last.sequence) : null,
    };
  }

  /**
   * Queues event `id` for another delivery now (docs/decisions/0005-outbox-and-delivery.md).
   * @throws DomainError not_found `delivery not found`; conflict `no webhook URL configured`, `webhook is
   *   disabled …`, `delivery is being attempted right now`.
   */
  async redeliver(instance: Instance, id: string): Promise<void> {
    const db = this.#store.db;
    if (!(await webhookEventExists(db, instance.id, id))) throw errors.notFound('delivery not found');
    if (instance.webhookUrl === null) throw errors.conflict('no webhook URL configured');
    const state = await getWebhookState(db, instance.id);
    if (state.disabledAt !== null) {
      throw errors.conflict(
        'webhook is disabled (the receiver answered 410 Gone): set the URL again with POST /v1/webhook',
      );
    }
    await this.requeue(instance.id, id);
  }

  /**
   * Queues event `eventId`'s delivery row for `endpointId` (`''`: the default webhook; otherwise an endpoint's,
   * docs/decisions/0035-webhook-endpoints.md) again: a new round of the worker's `maxAttempts`, due now; then wakes
   * the worker. The caller checked that the receiver may be sent to ({@link redeliver},
   * `WebhookEndpointService.redeliver`).
   * @throws DomainError not_found `delivery not found` (also when the endpoint has no delivery of the event);
   *   conflict `delivery is being attempted right now`.
   */
  async requeue(instanceId: string, eventId: string, endpointId = ''): Promise<void> {
    const result = await requeueDelivery(this.#store.db, {
      instanceId,
      eventId,
      endpointId,
      maxAttempts: this.#worker.maxAttempts,
      // Due now on the store's clock, which every node's claims judge due times on
      // (docs/decisions/0005-outbox-and-delivery.md, "Due times").
      runAt: this.#worker.dueNow(),
      // A claim is judged stale on the store's clock, as the worker judges it
      // (docs/decisions/0008-leases-and-fencing.md, "One clock").
      staleBefore: this.#worker.staleBefore(),
      now: nowIso(this.#clock),
    });
    if (result === 'not-found') throw errors.notFound('delivery not found');
    if (result === 'in-flight') throw errors.conflict('delivery is being attempted right now');
    this.#worker.wake();
  }
}
export { LOG_STATUSES, type LogStatus } from '../store/webhook-log.ts';
