import type { CallSettings, EngineCall } from '../domain/calls.ts';
import { MAX_CALL_MESSAGE } from '../domain/calls.ts';
import type { Clock } from '../domain/clock.ts';
import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { SessionManager } from '../sessions/manager.ts';
import { readCallSettings, writeCallSettings } from '../store/call-settings.ts';
import type { Store } from '../store/database.ts';

/**
 * Call handling of an instance (docs/decisions/0026-chats-edits-polls-and-calls.md): whether incoming calls are
 * rejected automatically and the message then sent to the caller. Stored per instance (migration 0011); the engines
 * read it through their session context when a call offer arrives, so a change applies to the next call without
 * reconnecting.
 */
export class CallService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #sessions: SessionManager;

  constructor(deps: { store: Store; clock: Clock; sessions: SessionManager }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#sessions = deps.sessions;
  }

  /**
   * Declines ringing call `id` (docs/decisions/0041-forward-calls-channels.md); resolves with the recorded `rejected`
   * call once its `call` event is recorded.
   * @throws DomainError not_found `call <id> not found` (the session never saw it, forgot it, or the engine cannot
   *   reject calls); conflict `call <id> is no longer ringing (<status>)`; not_logged_in / not_connected.
   */
  async reject(instance: Instance, id: string): Promise<EngineCall> {
    const session = this.#sessions.ready(instance);
    if (!session.rejectCall) throw errors.notFound(`call ${id} not found`);
    return session.rejectCall(id);
  }

  /** The instance's call handling (default: calls ring, no message). @throws DomainError not_found. */
  async settings(instance: Instance): Promise<CallSettings> {
    return readCallSettings(this.#store.db, instance.id);
  }

  /**
   * Replaces the instance's call handling. An empty or blank `message` means none.
   * @throws DomainError not_found `instance not found`; invalid when `message` is longer than
   *   {@link MAX_CALL_MESSAGE} characters or given while `reject` is false.
   */
  async update(instance: Instance, input: CallSettings): Promise<CallSettings> {
    const message = input.message === null || input.message.trim() === '' ? null : input.message;
    if (message !== null && message.length > MAX_CALL_MESSAGE) {
      throw errors.badRequest(`message must be at most ${MAX_CALL_MESSAGE} characters`);
    }
    if (message !== null && !input.reject) {
      throw errors.badRequest('message needs autoReject: true (it is sent only after an automatic reject)');
    }
    const settings = { reject: input.reject, message };
    await writeCallSettings(this.#store.db, instance.id, settings, new Date(this.#clock()).toISOString());
    return settings;
  }
}
