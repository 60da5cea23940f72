import type { Instance, InstanceId } from '../domain/instance.ts';
import type { PairingCode } from '../domain/messages.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { ConnectResult, SessionManager, SessionStatus } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { updateInstance } from '../store/instances.ts';
import { loadInstance } from './instances.ts';

/**
 * The session family (docs/api.md#session, docs/decisions/0016-session-lifecycle.md): connect, status, pairing,
 * disconnect, logout and the instance's HMAC key. Every method takes the instance id and reads the instance itself,
 * so another layer can run it for a request that arrived elsewhere.
 */
export class SessionService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #box: SecretBox;

  constructor(deps: { store: Store; sessions: SessionManager; box: SecretBox }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#box = deps.box;
  }

  /** The instance the call addresses, read by id. @throws DomainError not_found `instance not found`. */
  #load(instanceId: InstanceId): Promise<Instance> {
    return loadInstance(this.#store.db, instanceId);
  }

  /** See {@link SessionManager.connect}. @throws DomainError timeout; engine errors as raised. */
  async connect(
    instanceId: InstanceId,
    input: Parameters<SessionManager['connect']>[1],
  ): Promise<ConnectResult> {
    const instance = await this.#load(instanceId);
    return this.#sessions.connect(instance, input);
  }

  /** The connection state of the instance (docs/api.md#session). */
  async status(instanceId: InstanceId): Promise<SessionStatus> {
    const instance = await this.#load(instanceId);
    return this.#sessions.status(instance);
  }

  /**
   * The current QR pairing code. @throws DomainError conflict / not_connected
   * (docs/decisions/0016-session-lifecycle.md).
   */
  async pairingCode(instanceId: InstanceId): Promise<PairingCode> {
    const instance = await this.#load(instanceId);
    return this.#sessions.pairingCode(instance);
  }

  /** Starts linking by a code typed on the phone (live engine). @throws see {@link SessionManager.requestPairingCode}. */
  async requestPairingCode(instanceId: InstanceId, phone: string): Promise<string> {
    const instance = await this.#load(instanceId);
    return this.#sessions.requestPairingCode(instance, phone);
  }

  /** Disconnects and keeps the login (docs/api.md#session). */
  async disconnect(instanceId: InstanceId): Promise<void> {
    const instance = await this.#load(instanceId);
    return this.#sessions.disconnect(instance);
  }

  /** Unlinks the device and deletes the credentials (docs/api.md#session). */
  async logout(instanceId: InstanceId): Promise<void> {
    const instance = await this.#load(instanceId);
    return this.#sessions.logout(instance);
  }

  /**
   * Stores the instance's HMAC key for signed gateway requests, sealed at rest
   * (docs/decisions/0020-security-promises.md, docs/decisions/0021-gateway-form.md).
   */
  async setHmacKey(instanceId: InstanceId, hmacKey: string): Promise<void> {
    const instance = await this.#load(instanceId);
    await updateInstance(this.#store.db, instance.id, { hmacKeySealed: this.#box.seal(hmacKey) });
  }

  /** Whether the instance has an HMAC key. */
  async hasHmacKey(instanceId: InstanceId): Promise<boolean> {
    const instance = await this.#load(instanceId);
    return instance.hmacKeySealed !== null;
  }

  /** Removes the instance's HMAC key: gateway requests need no signature from now on. */
  async removeHmacKey(instanceId: InstanceId): Promise<void> {
    const instance = await this.#load(instanceId);
    await updateInstance(this.#store.db, instance.id, { hmacKeySealed: null });
  }
}
