import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import {
  BrokerUrlError,
  isBrokerUrl,
  MASK,
  maskedSecret,
  parseBrokerUrl,
  withStoredSecret,
} from '../brokers/urls.ts';
import type { Clock } from '../domain/clock.ts';
import { errors } from '../domain/errors.ts';
import type { EventType, Instance } from '../domain/instance.ts';
import { OutboundError, type OutboundGuard } from '../net/outbound-guard.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { Store } from '../store/database.ts';
import { toIso } from '../store/times.ts';
import {
  deleteEndpoint,
  type EndpointPatch,
  type EndpointRecord,
  getEndpoint,
  insertEndpoint,
  listEndpoints,
  MAX_ENDPOINTS,
  rotateEndpointSecret,
  updateEndpoint,
} from '../store/webhook-endpoints.ts';
import { webhookEventExists } from '../store/webhook-events.ts';
import { SECRET_PREFIX } from '../webhooks/signing.ts';
import type { DeliveryWorker } from '../webhooks/worker.ts';
import {
  checkReceiverUrl,
  type DeliveriesServiceQuery,
  type DeliveryPage,
  type WebhookService,
} from './webhooks.ts';

/**
 * A webhook endpoint as the API shows it (docs/api.md#webhook-endpoints, docs/decisions/0035-webhook-endpoints.md):
 * never its secret. Times are RFC 3339; `disabledAt`/`disabledReason` are set when a 410 Gone disabled it;
 * `previousSecretExpiresAt` while the secret a rotation replaced still signs
 * (docs/decisions/0094-secret-rotation-grace.md).
 */
export interface EndpointView {
  id: string;
  url: string;
  events: EventType[];
  description: string | null;
  enabled: boolean;
  disabledAt: string | null;
  disabledReason: string | null;
  /**
   * When the secret the last rotation replaced stops signing (every attempt until then carries a signature with it
   * too); null when no previous secret signs any more.
   */
  previousSecretExpiresAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** An endpoint with its secret in clear: the answer of creation and rotation only. */
export interface EndpointWithSecret extends EndpointView {
  secret: string;
}

/** The rule an endpoint URL breaks when its scheme is neither HTTPS nor a broker's. */
const URL_RULE = 'url must be an HTTPS URL or an amqp://, amqps:// or nats:// broker URL';

/** Bytes of randomness in a new secret (Standard Webhooks: 24 to 64; docs/decisions/0035-webhook-endpoints.md). */
const SECRET_BYTES = 32;

/** A new `whsec_` secret: the prefix and the base64 of {@link SECRET_BYTES} random bytes. */
function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/**
 * How long the secret a rotation replaces keeps signing when the request names no grace, seconds: 24 hours, as
 * Svix keeps an endpoint's previous secret (docs/decisions/0094-secret-rotation-grace.md).
 */
export const DEFAULT_PREVIOUS_SECRET_GRACE_SECONDS = 86_400;

/**
 * The longest grace a rotation may give the replaced secret, seconds: 7 days
 * (docs/decisions/0094-secret-rotation-grace.md).
 */
export const MAX_PREVIOUS_SECRET_GRACE_SECONDS = 604_800;

/**
 * The rule `previousSecretGraceSeconds` breaks when it is not a whole number of seconds within the bounds: the 400's
 * message, the schema's as the service's (docs/decisions/0001-envelope-and-error-codes.md names the field).
 */
export const GRACE_RULE =
  'previousSecretGraceSeconds must be an integer from 0 to ' +
  `${MAX_PREVIOUS_SECRET_GRACE_SECONDS} (seconds; 0 ends the old secret at once)`;

/** What `POST /v1/webhooks/{id}/rotate-secret` may say (docs/api.md#post-v1webhooksidrotate-secret). */
export interface RotateOptions {
  /**
   * How long the secret being replaced keeps signing, seconds, 0 to {@link MAX_PREVIOUS_SECRET_GRACE_SECONDS}
   * (default {@link DEFAULT_PREVIOUS_SECRET_GRACE_SECONDS}); 0 signs with the new secret only from now on and drops
   * any previous secret (a leaked secret).
   */
  previousSecretGraceSeconds?: number | undefined;
}

/**
 * An endpoint id as stored: ids are lower-case UUIDs, and one given in another case names the same endpoint, as an
 * event id does (`POST /v1/webhook/deliveries/{id}/redeliver`, docs/api.md#webhook-endpoints).
 */
function endpointIdOf(id: string): string {
  return id.toLowerCase();
}

/** The API view of an endpoint row at `now` (epoch ms: a previous secret whose expiry has passed shows as none). */
function toView(endpoint: EndpointRecord, now: number): EndpointView {
  const expires = endpoint.previousSecretExpiresAt;
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: endpoint.events as EventType[],
    description: endpoint.description,
    enabled: endpoint.enabled,
    disabledAt: endpoint.disabledAt === null ? null : toIso(endpoint.disabledAt),
    disabledReason: endpoint.disabledReason,
    previousSecretExpiresAt:
      endpoint.previousSecretSealed !== null && expires !== null && expires > now ? toIso(expires) : null,
    createdAt: toIso(endpoint.createdAt),
    updatedAt: toIso(endpoint.updatedAt),
  };
}

/** The values of a new endpoint (`POST /v1/webhooks`). */
export interface EndpointInput {
  url: string;
  events: readonly EventType[];
  description?: string | null | undefined;
}

/** The changes of `PATCH /v1/webhooks/{id}`; each omitted field is kept. */
export interface EndpointChanges {
  url?: string | undefined;
  events?: readonly EventType[] | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
}

/**
 * An instance's extra webhook endpoints (docs/api.md#webhook-endpoints, docs/decisions/0035-webhook-endpoints.md):
 * create (at most {@link MAX_ENDPOINTS}), list, read, change, delete, rotate the secret, and each one's delivery log
 * and redelivery.
 * The default webhook (`/v1/webhook`) is not one of them.
 */
export class WebhookEndpointService {
  readonly #store: Store;
  readonly #box: SecretBox;
  readonly #guard: OutboundGuard;
  readonly #worker: DeliveryWorker;
  readonly #webhooks: WebhookService;
  readonly #clock: Clock;

  constructor(deps: {
    store: Store;
    box: SecretBox;
    guard: OutboundGuard;
    worker: DeliveryWorker;
    webhooks: WebhookService;
    clock: Clock;
  }) {
    this.#store = deps.store;
    this.#box = deps.box;
    this.#guard = deps.guard;
    this.#worker = deps.worker;
    this.#webhooks = deps.webhooks;
    this.#clock = deps.clock;
  }

  /**
   * Creates an endpoint with a new secret, shown only in this answer.
   * @throws DomainError invalid (`url …`, from the outbound guard's checks as for `POST /v1/webhook`; `url carries
   *   the masked password ****: send the password` for a broker URL copied as the API shows it); conflict
   *   `an instance has at most 10 webhook endpoints`.
   */
  async create(
    instance: Instance,
    input: EndpointInput,
    log: FastifyBaseLogger,
  ): Promise<EndpointWithSecret> {
    const url = await this.#checkUrl(input.url, log, instance.id, null);
    const secret = newSecret();
    const id = randomUUID();
    const inserted = await insertEndpoint(
      this.#store.db,
      {
        id,
        instanceId: instance.id,
        url: url.shown,
        urlSealed: url.sealed,
        events: [...new Set(input.events)],
        description: input.description ?? null,
        secretSealed: this.#box.seal(secret),
        now: this.#clock(),
      },
      MAX_ENDPOINTS,
    );
    if (!inserted) throw errors.conflict(`an instance has at most ${MAX_ENDPOINTS} webhook endpoints`);
    return { ...(await this.get(instance, id)), secret };
  }

  /**
   * Checks an endpoint URL: an HTTPS receiver as `POST /v1/webhook` does, or a broker URL
   * (docs/decisions/0037-broker-endpoints.md) whose host passes the same outbound checks. A broker URL whose
   * password or NATS token is the mask `****` (the URL as the API shows it, sent back with another part changed)
   * gets the secret of `storedSealed` (the endpoint's whole URL as stored, sealed; null for a new endpoint or one
   * without a secret) when both name the same scheme, host, port and user ({@link withStoredSecret}); the mask is
   * never stored as the secret.
   * @returns the URL as shown (a password or token masked) and, when it carries one, the whole URL sealed.
   * @throws DomainError invalid `url must be an HTTPS URL or an amqp://, amqps:// or nats:// broker URL`,
   *   `url is not a valid broker URL: …`, `url carries the masked password ****: send the password` (or `token`:
   *   the mask with no stored secret of the same login to stand for), `url is refused: …` (the detail is logged on
   *   `log`, never answered).
   */
  async #checkUrl(
    submitted: string,
    log: FastifyBaseLogger,
    instanceId: string,
    storedSealed: string | null,
  ): Promise<{ shown: string; sealed: string | null }> {
    let raw = submitted;
    if (!isBrokerUrl(raw)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(raw) && !/^https:/i.test(raw)) throw errors.badRequest(URL_RULE);
      return { shown: await checkReceiverUrl(this.#guard, raw, 'url', log, instanceId), sealed: null };
    }
    let parsed: ReturnType<typeof parseBrokerUrl>;
    try {
      parsed = parseBrokerUrl(raw);
    } catch (error) {
      if (error instanceof BrokerUrlError)
        throw errors.badRequest(`url is not a valid broker URL: ${error.message}`);
      throw error;
    }
    const masked = maskedSecret(parsed.target);
    if (masked !== undefined) {
      const restored =
        storedSealed === null ? undefined : withStoredSecret(raw, this.#box.open(storedSealed), masked);
      if (restored === undefined)
        throw errors.badRequest(`url carries the masked ${masked} ${MASK}: send the ${masked}`);
      raw = restored;
      parsed = parseBrokerUrl(raw);
    }
    try {
      await this.#guard.checkedAddresses(parsed.target.hostname);
    } catch (error) {
      if (error instanceof OutboundError) {
        log.info(
          { err: error, reason: error.reason, instanceId },
          'broker URL refused by the outbound guard',
        );
        throw errors.badRequest(`url is refused: ${error.publicMessage}`);
      }
      throw error;
    }
    return { shown: parsed.masked, sealed: parsed.hasSecret ? this.#box.seal(raw) : null };
  }

  /** The instance's endpoints, oldest first, without secrets. */
  async list(instance: Instance): Promise<EndpointView[]> {
    const now = this.#clock();
    return (await listEndpoints(this.#store.db, instance.id)).map((endpoint) => toView(endpoint, now));
  }

  /**
   * Endpoint `id` (in any case: ids are compared lower-cased).
   * @throws DomainError not_found `webhook endpoint not found` (also for another instance's).
   */
  async get(instance: Instance, id: string): Promise<EndpointView> {
    const endpoint = await getEndpoint(this.#store.db, instance.id, endpointIdOf(id));
    if (!endpoint) throw errors.notFound('webhook endpoint not found');
    return toView(endpoint, this.#clock());
  }

  /**
   * Changes endpoint `id`; `enabled: true` also clears a 410's disabled state. Wakes the worker. A broker `url`
   * whose password or token is the mask `****` keeps the stored secret when its scheme, host, port and user are the
   * stored URL's, and is refused otherwise (docs/decisions/0037-broker-endpoints.md "Credentials").
   * @throws DomainError not_found `webhook endpoint not found`; invalid `url …` as {@link create}, and
   *   `url carries the masked password ****: send the password` (or `token`).
   */
  async update(
    instance: Instance,
    givenId: string,
    changes: EndpointChanges,
    log: FastifyBaseLogger,
  ): Promise<EndpointView> {
    const id = endpointIdOf(givenId);
    const current = await getEndpoint(this.#store.db, instance.id, id);
    if (!current) throw errors.notFound('webhook endpoint not found');
    const patch: EndpointPatch = {};
    // The URL as shown (a broker password masked) sent back unchanged keeps the stored one; sent back with another
    // part changed, it keeps the stored password when the login and server are the same (#checkUrl).
    if (changes.url !== undefined && changes.url !== current.url)
      patch.url = await this.#checkUrl(changes.url, log, instance.id, current.urlSealed);
    if (changes.events !== undefined) patch.events = [...new Set(changes.events)];
    if (changes.description !== undefined) patch.description = changes.description;
    if (changes.enabled !== undefined) patch.enabled = changes.enabled;
    if (!(await updateEndpoint(this.#store.db, instance.id, id, patch, this.#clock())))
      throw errors.notFound('webhook endpoint not found');
    this.#worker.wake();
    return this.get(instance, id);
  }

  /**
   * Deletes endpoint `id` with its queued deliveries and log: nothing more is sent to it.
   * @throws DomainError not_found `webhook endpoint not found`.
   */
  async remove(instance: Instance, id: string): Promise<void> {
    if (!(await deleteEndpoint(this.#store.db, instance.id, endpointIdOf(id))))
      throw errors.notFound('webhook endpoint not found');
  }

  /**
   * Gives endpoint `id` a new secret (shown only in this answer; docs/decisions/0094-secret-rotation-grace.md). Every
   * attempt from then on is signed with it, and, for `previousSecretGraceSeconds` (default 24 hours), also with the
   * secret it replaces, so a receiver that has not yet deployed the new secret still verifies. The replaced secret
   * becomes the previous one in place of any earlier previous secret; a grace of 0 keeps none.
   * @throws DomainError invalid {@link GRACE_RULE}; not_found `webhook endpoint not found`.
   */
  async rotateSecret(
    instance: Instance,
    id: string,
    options: RotateOptions = {},
  ): Promise<EndpointWithSecret> {
    const grace = options.previousSecretGraceSeconds ?? DEFAULT_PREVIOUS_SECRET_GRACE_SECONDS;
    if (!Number.isInteger(grace) || grace < 0 || grace > MAX_PREVIOUS_SECRET_GRACE_SECONDS)
      throw errors.badRequest(GRACE_RULE);
    const secret = newSecret();
    const sealed = this.#box.seal(secret);
    const now = this.#clock();
    const expiresAt = grace === 0 ? null : now + grace * 1000;
    if (!(await rotateEndpointSecret(this.#store.db, instance.id, endpointIdOf(id), sealed, expiresAt, now)))
      throw errors.notFound('webhook endpoint not found');
    return { ...(await this.get(instance, id)), secret };
  }

  /**
   * One page of endpoint `id`'s delivery log: the events queued for it, newest first, as `GET /v1/webhook/deliveries`.
   * @throws DomainError not_found `webhook endpoint not found`; invalid `cursor is invalid`.
   */
  async deliveries(instance: Instance, id: string, query: DeliveriesServiceQuery): Promise<DeliveryPage> {
    const endpoint = await this.get(instance, id);
    return this.#webhooks.deliveries(instance, { ...query, endpointId: endpoint.id });
  }

  /**
   * Queues endpoint `id`'s delivery of event `eventId` again: a fresh round of attempts, due now, as
   * `POST /v1/webhook/deliveries/{id}/redeliver` does for the default webhook (docs/decisions/0005-outbox-and-delivery.md,
   * docs/decisions/0035-webhook-endpoints.md). Only an event in the endpoint's log can be sent again: the endpoint's
   * filter decided at recording time, and the default webhook's delivery of the event is not touched.
   * @throws DomainError not_found `webhook endpoint not found`, `delivery not found` (an unknown event, or one
   *   never queued for this endpoint); conflict `webhook endpoint is disabled …`, `delivery is being attempted right
   *   now`.
   */
  async redeliver(instance: Instance, givenId: string, eventId: string): Promise<void> {
    const endpoint = await this.get(instance, givenId);
    const { id } = endpoint;
    if (!(await webhookEventExists(this.#store.db, instance.id, eventId)))
      throw errors.notFound('delivery not found');
    if (!endpoint.enabled) {
      throw errors.conflict(
        'webhook endpoint is disabled: turn it on again with PATCH /v1/webhooks/{id} enabled:true',
      );
    }
    await this.#webhooks.requeue(instance.id, eventId, id);
  }
}
