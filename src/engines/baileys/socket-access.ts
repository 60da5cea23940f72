import { DomainError, errors } from '../../domain/errors.ts';
import { mapPlatformErrors } from './errors.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { SocketLike } from './socket.ts';

/**
 * Which socket a live session's request may use, by the phase of its {@link Lifecycle}
 * (docs/decisions/0016-session-lifecycle.md): an operation needs paired credentials and the open socket; a pairing
 * code needs a pairing attempt under way and no login yet.
 */

/**
 * The open socket for an operation.
 * @throws DomainError not_logged_in `instance is not logged in` without paired credentials; platform_unreachable
 *   (503) while the session reconnects; not_connected `instance is not connected` when disconnected or stopped (with
 *   the stop reason).
 */
export async function operationSocket(life: Lifecycle): Promise<SocketLike> {
  await life.loadSummary();
  const state = life.state();
  if (!state.loggedIn) throw errors.notLoggedIn();
  const sock = life.openSocket;
  if (sock) return sock;
  const why = state.reason ? `: ${state.reason}` : '';
  if (life.phase === 'waiting' || life.phase === 'connecting') {
    throw new DomainError('platform_unreachable', `not connected to the platform right now${why}`);
  }
  throw new DomainError('not_connected', `instance is not connected${why}`);
}

/**
 * Links by an 8-character code typed on the phone (Baileys `requestPairingCode`) during a running pairing attempt.
 * @returns the code, as the platform gave it.
 * @throws DomainError conflict `already logged in` once paired; not_connected `instance is not connected` outside a
 *   pairing attempt; the platform's refusal, mapped by `mapPlatformErrors`.
 */
export async function requestPairingCode(life: Lifecycle, phone: string): Promise<string> {
  await life.loadSummary();
  if (life.state().loggedIn) throw errors.alreadyLoggedIn();
  const sock = life.socket;
  if (!sock || (life.phase !== 'pairing' && life.phase !== 'connecting')) throw errors.notConnected();
  return mapPlatformErrors(async () => {
    await sock.waitForSocketOpen();
    return sock.requestPairingCode(phone);
  });
}
