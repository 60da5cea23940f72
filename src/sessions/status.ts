import type { Environment } from '../domain/environment.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { ConnectionState, PairingCode } from '../domain/messages.ts';
import type { EngineSession } from '../engines/engine.ts';

/**
 * What the session lifecycle answers (docs/api.md#session, docs/decisions/0016-session-lifecycle.md): the connect
 * and status results, the QR of a session pairing, and the 503 of an instance reconnecting by itself, each derived
 * from the stored instance and its engine session's state (manager.ts `SessionManager` holds the sessions).
 */

/** `Retry-After` of the 503 a call gets while its instance reconnects by itself, seconds. */
export const RECONNECT_RETRY_AFTER_S = 2;

/** 503 platform_unreachable with {@link RECONNECT_RETRY_AFTER_S}: a connection that should be up is not, yet. */
export function reconnecting(): DomainError {
  return new DomainError('platform_unreachable', 'not connected to the platform right now', {
    retryAfter: RECONNECT_RETRY_AFTER_S,
  });
}

/**
 * 409 not_connected for a session that should be connected but is stopped until the next `connect` (the platform
 * replaced or refused it, or a connect failed; docs/decisions/0016-session-lifecycle.md): `instance is not
 * connected`, with the stop's `reason` when the engine gives one, as the engine's own operations say it
 * (src/engines/baileys/socket-access.ts `operationSocket`).
 */
export function stoppedSession(reason: string | undefined): DomainError {
  return new DomainError('not_connected', `instance is not connected${reason ? `: ${reason}` : ''}`);
}

/**
 * How long `connect` with `immediate:false` waits for login, ms (docs/api.md#session,
 * docs/decisions/0016-session-lifecycle.md).
 */
export const LOGIN_VERIFY_MS = 10_000;

/** Data of a connect result (docs/api.md#session). */
export interface ConnectResult {
  details: 'Connected!';
  events: string;
  jid: string;
  webhook: string;
}

/**
 * Data of a status result (docs/api.md#session, with the optional fields of
 * docs/decisions/0016-session-lifecycle.md).
 */
export interface SessionStatus {
  connected: boolean;
  loggedIn: boolean;
  jid?: string;
  instanceId: string;
  env: Environment;
  /** Why the connection last stopped, when the engine says (e.g. replaced by another session). */
  reason?: string;
}

/**
 * The status of `instance` whose session in this process is in `state` (docs/api.md#session,
 * docs/decisions/0016-session-lifecycle.md). Without a session here (`state` undefined): not connected, logged in
 * when a login is stored.
 */
export function sessionStatus(instance: Instance, state: ConnectionState | undefined): SessionStatus {
  const loggedIn = state ? state.loggedIn : instance.jid !== null;
  const jid = state ? state.jid : instance.jid;
  return {
    connected: state?.connected ?? false,
    loggedIn,
    ...(loggedIn && jid ? { jid } : {}),
    instanceId: instance.id,
    env: instance.env,
    ...(state?.reason ? { reason: state.reason } : {}),
  };
}

/**
 * The current QR code of `instance`, whose session in this process is `session`
 * (docs/decisions/0016-session-lifecycle.md).
 * @throws DomainError conflict `already logged in` / `instance is not connected`.
 */
export function currentPairingCode(instance: Instance, session: EngineSession | undefined): PairingCode {
  const state = session?.state();
  if (state?.loggedIn ?? instance.jid !== null) throw errors.alreadyLoggedIn();
  const code = session?.pairingCode();
  if (!code) throw errors.notConnected();
  return code;
}
