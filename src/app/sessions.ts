import type { Instance } from '../domain/instance.ts';
import type { PairingCode } from '../domain/messages.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { ConnectResult, SessionManager, SessionStatus } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { updateInstance } from '../store/instances.ts';

/**
 * The session family (docs/api.md#session, docs/decisions/0016-session-lifecycle.md): connect, status, pairing,
 * disconnect, logout and the instance's HMAC key. Every method takes the instance the caller resolved
 * (see src/app/index.ts).
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

  /** See {@link SessionManager.connect}. @throws DomainError timeout; engine errors as raised. */
  async connect(instance: Instance, input: Parameters<SessionManager['connect']>[1]): Promise<ConnectResult> {
    return this.#sessions.connect(instance, input);
  }

  /** The connection state of the instance (docs/api.md#session). */
  async status(instance: Instance): Promise<SessionStatus> {
    return this.#sessions.status(instance);
  }

  /**
   * The current QR pairing code. @throws DomainError conflict / not_connected
   * (docs/decisions/0016-session-lifecycle.md).
   */
  async pairingCode(instance: Instance): Promise<PairingCode> {
    return this.#sessions.pairingCode(instance);
  }

  /** Starts linking by a code typed on the phone (live engine). @throws see {@link SessionManager.requestPairingCode}. */
  async requestPairingCode(instance: Instance, phone: string): Promise<string> {
    return this.#sessions.requestPairingCode(instance, phone);
  }

  /** Disconnects and keeps the login (docs/api.md#session). */
  async disconnect(instance: Instance): Promise<void> {
    return this.#sessions.disconnect(instance);
  }

  /** Unlinks the device and deletes the credentials (docs/api.md#session). */
  async logout(instance: Instance): Promise<void> {
    return this.#sessions.logout(instance);
  }

  /**
   * Stores the instance's HMAC key for signed gateway requests, sealed at rest
   * (docs/decisions/0020-security-promises.md, docs/decisions/0021-gateway-form.md).
   */
  async setHmacKey(instance: Instance, hmacKey: string): Promise<void> {
    await updateInstance(this.#store.db, instance.id, { hmacKeySealed: this.#box.seal(hmacKey) });
  }

  /** Whether the instance has an HMAC key. */
  async hasHmacKey(instance: Instance): Promise<boolean> {
    return instance.hmacKeySealed !== null;
  }

  /** Removes the instance's HMAC key: gateway requests need no signature from now on. */
  async removeHmacKey(instance: Instance): Promise<void> {
    await updateInstance(this.#store.db, instance.id, { hmacKeySealed: null });
  }
}
