import type { KeyAuthenticator } from '../auth/authenticator.ts';
import type { Clock } from '../domain/clock.ts';
import type { Environment } from '../domain/environment.ts';
import { DomainError, errors } from '../domain/errors.ts';
import {
  DEFAULT_SUBSCRIPTION,
  EVENT_TYPES,
  type EventType,
  type Instance,
  type InstanceId,
} from '../domain/instance.ts';
import type { Scope } from '../domain/scope.ts';
import type { LiveFeed, LiveListener } from '../events/live-feed.ts';

export type { LiveChange, LiveListener } from '../events/live-feed.ts';

import { limitsOf, type PlanRateLimiter, type WindowState } from '../ratelimit/limiter.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { ApiKeyRecord } from '../store/api-keys.ts';
import type { DashboardRole } from '../store/dashboard-users.ts';
import type { Store } from '../store/database.ts';
import { countInstances, updateInstance } from '../store/instances.ts';
import type { Organization } from '../store/organizations.ts';
import { toIso } from '../store/times.ts';
import { lastEvents } from '../store/webhook-events.ts';
import { adminCreateKey, adminListKeys, adminRevokeKey } from './api-keys.ts';
import { adminCreateInstance, adminListInstances, loadInstance } from './instances.ts';
import { instanceCapOf } from './organizations.ts';

/** An instance as the dashboard lists it: identity, linked number, connection state and webhook URL. */
export interface InstanceSummary {
  id: InstanceId;
  name: string;
  env: Environment;
  phone: string | null;
  connected: boolean;
  loggedIn: boolean;
  /** Why the connection last stopped, when the engine says. */
  reason: string | null;
  lastConnectedAt: string | null;
  webhook: string | null;
  subscribe: EventType[];
  hasHmacKey: boolean;
}

/**
 * An API key as the dashboard lists it: never its value or hash (docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0022-dashboard.md).
 */
export interface KeySummary {
  id: string;
  name: string;
  prefix: string;
  env: Environment;
  scopes: string[];
  instances: string[];
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
  createdAt: string;
}

/**
 * One environment's usage against the organization's plan (docs/decisions/0019-rate-limits-and-plans.md): the minute
 * and day windows, and how many instances it has (docs/decisions/0029-instances-over-the-api.md).
 */
export interface EnvUsage {
  env: Environment;
  windows: [WindowState, WindowState];
  instances: number;
}

/** The organization's plan, its limits (requests, instances per environment) and its usage in both environments. */
export interface Usage {
  plan: Organization['plan'];
  perMinute: number;
  perDay: number;
  /** Instances allowed per environment (docs/decisions/0029-instances-over-the-api.md). */
  maxInstances: number;
  usage: EnvUsage[];
}

/**
 * Scopes only an owner may put on a key from the dashboard (docs/decisions/0022-dashboard.md): `instances:manage`
 * deletes instances, which only owners may do, so a member's key carrying it would do more than the member.
 */
export const OWNER_ONLY_SCOPES: ReadonlySet<string> = new Set<Scope>(['instances:manage']);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function keySummary(record: ApiKeyRecord): KeySummary {
  return {
    id: record.id,
    name: record.name,
    prefix: record.prefix,
    env: record.env,
    scopes: record.scopes,
    instances: record.instanceIds,
    expiresAt: record.expiresAt,
    revokedAt: record.revokedAt,
    lastUsedAt: record.lastUsedAt,
    createdAt: record.createdAt,
  };
}

/**
 * The organization-scoped admin operations of the dashboard (docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0019-rate-limits-and-plans.md, docs/decisions/0022-dashboard.md): instances, API keys, webhook
 * subscription and usage. Every method takes the signed-in user's organization id and refuses anything of another
 * organization as `not found` (docs/decisions/0020-security-promises.md: existence is not revealed). Session, webhook
 * and sandbox operations on an instance go through the API's own services once {@link instanceOf} checked the
 * organization.
 */
export class DashboardAdminService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #limiter: PlanRateLimiter;
  readonly #keys: KeyAuthenticator;
  readonly #feed: LiveFeed;
  readonly #clock: Clock;

  constructor(deps: {
    store: Store;
    sessions: SessionManager;
    limiter: PlanRateLimiter;
    keys: KeyAuthenticator;
    feed: LiveFeed;
    clock: Clock;
  }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#limiter = deps.limiter;
    this.#keys = deps.keys;
    this.#feed = deps.feed;
    this.#clock = deps.clock;
  }

  /** Instance `id` when it belongs to `orgId`. @throws DomainError not_found `instance not found`. */
  async instanceOf(orgId: string, id: InstanceId): Promise<Instance> {
    if (!UUID.test(id)) throw errors.instanceNotFound();
    const instance = await loadInstance(this.#store.db, id.toLowerCase());
    if (instance.orgId !== orgId) throw errors.instanceNotFound();
    return instance;
  }

  /** The summary of one instance of the organization. @throws DomainError not_found. */
  async instance(orgId: string, id: InstanceId): Promise<InstanceSummary> {
    return this.#summary(await this.instanceOf(orgId, id));
  }

  /**
   * The latest event of each of the organization's instances `ids`, by instance id: its type and when it was
   * recorded (RFC 3339). Instances without events are absent.
   */
  async lastEvents(ids: readonly InstanceId[]): Promise<Record<string, { type: string; at: string }>> {
    const found = await lastEvents(this.#store.db, ids);
    return Object.fromEntries(
      [...found].map(([id, event]) => [id, { type: event.type, at: toIso(event.at) }]),
    );
  }

  /** Every instance of the organization, oldest first. */
  async instances(orgId: string): Promise<InstanceSummary[]> {
    const all = await adminListInstances(this.#store.db, orgId);
    return all.map((instance) => this.#summary(instance));
  }

  /**
   * Creates an instance, within the plan's cap (the same path as the API and the CLI,
   * docs/decisions/0029-instances-over-the-api.md).
   * @throws DomainError invalid on a bad env or name; forbidden at the plan's cap.
   */
  async createInstance(orgId: string, input: { env: string; name?: string }): Promise<InstanceSummary> {
    return this.#summary(await adminCreateInstance(this.#store.db, { org: orgId, ...input, style: 'api' }));
  }

  /**
   * Sets the webhook subscription of an instance (the same field `connect` sets, docs/api.md#webhook).
   * @throws DomainError not_found; invalid when empty.
   */
  async setSubscription(orgId: string, id: InstanceId, subscribe: EventType[]): Promise<EventType[]> {
    const instance = await this.instanceOf(orgId, id);
    const wanted = EVENT_TYPES.filter((type) => subscribe.includes(type));
    if (wanted.length === 0) throw errors.badRequest('subscribe must name at least one event type');
    await updateInstance(this.#store.db, instance.id, { subscribe: wanted });
    return wanted;
  }

  /** Calls `listener` on every committed change of an instance of the organization. @throws DomainError not_found. */
  async watch(orgId: string, id: InstanceId, listener: LiveListener): Promise<() => void> {
    const instance = await this.instanceOf(orgId, id);
    return this.#feed.subscribe(instance.id, listener);
  }

  /** The organization's keys, newest first, without values. */
  async keys(orgId: string): Promise<KeySummary[]> {
    return (await adminListKeys(this.#store.db, orgId)).map(keySummary);
  }

  /**
   * Creates a key; the full value is in the result once (docs/decisions/0003-scopes-and-keys.md). A key can do no
   * more than the role of the user creating it: scopes in {@link OWNER_ONLY_SCOPES} need the `owner` role
   * (docs/decisions/0022-dashboard.md).
   * @throws DomainError forbidden `scopes: <scope> needs the owner role (you are <role>): …` when `role` may not
   *   create such a key; invalid naming the field (env, scopes, instances, expiresIn).
   */
  async createKey(
    orgId: string,
    input: { env: string; name?: string; scopes?: string[]; instances?: string[]; expiresIn?: string },
    role: DashboardRole,
  ): Promise<{ key: string; record: KeySummary }> {
    const beyond = role === 'owner' ? undefined : input.scopes?.find((scope) => OWNER_ONLY_SCOPES.has(scope));
    if (beyond !== undefined)
      throw new DomainError(
        'forbidden',
        `scopes: ${beyond} needs the owner role (you are ${role}): a key may not do more than its creator`,
      );
    const created = await adminCreateKey(
      this.#store.db,
      { org: orgId, ...input, style: 'api' },
      this.#clock(),
    );
    return { key: created.key, record: keySummary(created.record) };
  }

  /**
   * Revokes a key of the organization; this process stops accepting it at once, its cached verification dropped
   * whatever the revocation's time (others within their poll, at once on PostgreSQL,
   * docs/decisions/0003-scopes-and-keys.md).
   * @throws DomainError not_found `key not found`.
   */
  async revokeKey(orgId: string, id: string): Promise<KeySummary> {
    const owned = (await adminListKeys(this.#store.db, orgId)).some((key) => key.id === id);
    if (!owned) throw errors.notFound('key not found');
    const record = await adminRevokeKey(this.#store.db, id);
    this.#keys.forget(record.keyHash);
    await this.#keys.pollRevocations();
    return keySummary(record);
  }

  /**
   * The plan's limits and both environments' windows and instance counts, without consuming a request
   * (docs/decisions/0019-rate-limits-and-plans.md, docs/decisions/0029-instances-over-the-api.md).
   */
  async usage(org: Organization): Promise<Usage> {
    const limits = limitsOf(org);
    const usage: EnvUsage[] = [];
    for (const env of ['test', 'live'] as const) {
      usage.push({
        env,
        windows: await this.#limiter.usage(org.id, env, limits),
        instances: await countInstances(this.#store.db, org.id, env),
      });
    }
    return { plan: org.plan, ...limits, maxInstances: instanceCapOf(org), usage };
  }

  #summary(instance: Instance): InstanceSummary {
    const status = this.#sessions.status(instance);
    return {
      id: instance.id,
      name: instance.name,
      env: instance.env,
      phone: instance.phone,
      connected: status.connected,
      loggedIn: status.loggedIn,
      reason: status.reason ?? null,
      lastConnectedAt: instance.lastConnectedAt,
      webhook: instance.webhookUrl,
      subscribe: instance.subscribe ?? [...DEFAULT_SUBSCRIPTION],
      hasHmacKey: instance.hmacKeySealed !== null,
    };
  }
}
