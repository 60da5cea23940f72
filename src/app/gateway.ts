import type { AuthContext } from '../auth/authenticator.ts';
import type { Instance } from '../domain/instance.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { Store } from '../store/database.ts';
import type { ReplayMemory } from '../store/gateway-replay.ts';
import { resolveInstance } from './instances.ts';

/** The instance a gateway request names and its HMAC key in clear (null when it has none). */
export interface GatewayInstance {
  instance: Instance;
  hmacKey: string | null;
}

/**
 * What the gateway form needs below HTTP (docs/decisions/0021-gateway-form.md): the instance `x-instance-id` names with
 * its HMAC key opened, and the memory of signatures already used (Redis when configured, else the `gateway_replay`
 * table).
 */
export class GatewayService {
  readonly #store: Store;
  readonly #box: SecretBox;
  readonly #replay: ReplayMemory;

  constructor(deps: { store: Store; box: SecretBox; replay: ReplayMemory }) {
    this.#store = deps.store;
    this.#box = deps.box;
    this.#replay = deps.replay;
  }

  /**
   * Instance `id` as `auth` may address it, with its HMAC key.
   * @throws DomainError not_found `instance not found` (docs/decisions/0002-instance-resolution.md).
   */
  async instance(auth: AuthContext, id: string): Promise<GatewayInstance> {
    const instance = await resolveInstance(this.#store.db, auth, id);
    return {
      instance,
      hmacKey: instance.hmacKeySealed === null ? null : this.#box.open(instance.hmacKeySealed),
    };
  }

  /**
   * Remembers `signature` of instance `instanceId` until `expiresAtMs` (epoch ms).
   * @returns false when it was already remembered (a replay).
   */
  remember(instanceId: string, signature: string, expiresAtMs: number): Promise<boolean> {
    return this.#replay.remember(instanceId, signature, expiresAtMs);
  }
}
