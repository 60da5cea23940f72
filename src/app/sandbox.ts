import type { RegistrationCache } from '../contacts/registration-cache.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance, InstanceId } from '../domain/instance.ts';
import type { GroupInfo, SentMessage } from '../domain/messages.ts';
import type {
  SandboxControls,
  SandboxForeignGroupInput,
  SandboxInboundInput,
  SandboxPresenceInput,
  SandboxReceiptInput,
  SandboxUpdateInput,
  SandboxUserInput,
  SandboxVoteInput,
} from '../engines/engine.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { findInstanceByPhone } from '../store/instances.ts';
import { loadInstance } from './instances.ts';

/**
 * The sandbox family (DESIGN D9): the simulated platform's test helpers of a test instance. Operations other
 * than `scan` answer not_logged_in / not_connected themselves before login (DESIGN D6).
 */
export class SandboxService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #registrations: RegistrationCache;

  constructor(deps: { store: Store; sessions: SessionManager; registrations: RegistrationCache }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#registrations = deps.registrations;
  }

  /** The instance the call addresses, read by id. @throws DomainError not_found `instance not found`. */
  #load(instanceId: InstanceId): Promise<Instance> {
    return loadInstance(this.#store.db, instanceId);
  }

  /** The instance's simulated platform. @throws DomainError not_found on a live instance. */
  #controls(instance: Instance): SandboxControls {
    const controls = this.#sessions.session(instance).sandbox;
    if (!controls) throw errors.notFound('sandbox helpers exist only for svc_test_ keys');
    return controls;
  }

  /**
   * The owner scans the current QR: logs in as `phone` (generated when omitted).
   * @returns the phone number logged in.
   * @throws DomainError conflict `already logged in`, `phone <p> is already linked to another instance`;
   *   not_connected when no pairing runs.
   */
  async scan(instanceId: InstanceId, input: { code?: string; phone?: string }): Promise<string> {
    const instance = await this.#load(instanceId);
    const controls = this.#sessions.existing(instance.id)?.sandbox;
    if (!controls) throw instance.jid !== null ? errors.alreadyLoggedIn() : errors.notConnected();
    const phone = input.phone;
    if (phone !== undefined) {
      const holder = await findInstanceByPhone(this.#store.db, instance.orgId, instance.env, phone);
      if (holder && holder.id !== instance.id) {
        throw new DomainError('conflict', `phone ${phone} is already linked to another instance`);
      }
    }
    const state = await controls.scan(input);
    return state.phone ?? '';
  }

  /** A message arrives from a simulated user. See {@link SandboxControls.inbound}. */
  async inbound(instanceId: InstanceId, input: SandboxInboundInput): Promise<SentMessage> {
    const instance = await this.#load(instanceId);
    return this.#controls(instance).inbound(input);
  }

  /** The recipient acknowledges a sent message. See {@link SandboxControls.receipt}. */
  async receipt(instanceId: InstanceId, input: SandboxReceiptInput): Promise<void> {
    const instance = await this.#load(instanceId);
    return this.#controls(instance).receipt(input);
  }

  /** A simulated user starts or stops typing. See {@link SandboxControls.presence}. */
  async presence(instanceId: InstanceId, input: SandboxPresenceInput): Promise<void> {
    const instance = await this.#load(instanceId);
    return this.#controls(instance).presence(input);
  }

  /** Defines a simulated user and forgets the cached registration answer for its number (DESIGN D6, D9). */
  async defineUser(instanceId: InstanceId, input: SandboxUserInput): Promise<void> {
    const instance = await this.#load(instanceId);
    await this.#controls(instance).defineUser(input);
    this.#registrations.invalidate(instance.id, input.phone);
  }

  /** A group another user created with the account as a plain member. See {@link SandboxControls.createForeignGroup}. */
  async createForeignGroup(instanceId: InstanceId, input: SandboxForeignGroupInput): Promise<GroupInfo> {
    const instance = await this.#load(instanceId);
    return this.#controls(instance).createForeignGroup(input);
  }

  /** A simulated user edits or deletes their message. See {@link SandboxControls.updateMessage}. */
  async updateMessage(instanceId: InstanceId, input: SandboxUpdateInput): Promise<void> {
    const instance = await this.#load(instanceId);
    return this.#controls(instance).updateMessage(input);
  }

  /** A simulated user votes on a poll the instance sent. See {@link SandboxControls.vote}. */
  async vote(instanceId: InstanceId, input: SandboxVoteInput): Promise<void> {
    const instance = await this.#load(instanceId);
    return this.#controls(instance).vote(input);
  }
}
