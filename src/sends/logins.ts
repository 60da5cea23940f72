import type { EngineEvent } from '../domain/messages.ts';
import type { PaceKeeper } from './pause.ts';
import { afterLogin, afterLogout, type Runners } from './runners.ts';

/** True when `event` is a login: a connection state that says connected and logged in. */
export function isLogin(event: EngineEvent): boolean {
  return event.type === 'connection' && event.state.connected && event.state.loggedIn;
}

/**
 * What a login of instance `instanceId` changes in the send queue's memory (docs/decisions/0009-sends-as-jobs.md,
 * 0013-pacing.md). A login is a new hold on the instance (after a restart, a failover or a reconnect): `sending`
 * jobs no relay of this process is running are handed back before the next claim, also by a drain already running
 * (the job it relays is held, so the hand-back leaves it); a relay whose outcome was unknown no longer holds the
 * queue (the hand-back gives its job back first); the last relay is forgotten when a logout came since; the sends
 * waiting for a new-chat slot are looked at again (runners.ts `afterLogin`); and the pace and pause are read from the store again (another node may have changed them while it held the instance). The
 * caller wakes the queue.
 */
export function loggedIn(runners: Runners, pace: PaceKeeper, instanceId: string): void {
  const runner = runners.peek(instanceId);
  if (runner) afterLogin(runner);
  pace.forget(instanceId);
}

/**
 * What a committed logout of instance `instanceId` changes in the send queue's memory (docs/decisions/0013-pacing.md):
 * the logout's transaction ended the account's pause and timelock in the store (logout.ts), so they are read again;
 * the pace counts its interval from the next account's own relays, so the last relay is forgotten, and forgotten
 * again at the next login, in case a relay of the account still under way ends after this.
 */
export function loggedOut(runners: Runners, pace: PaceKeeper, instanceId: string): void {
  pace.forget(instanceId);
  const runner = runners.peek(instanceId);
  if (runner) afterLogout(runner);
}
