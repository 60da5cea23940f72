import type { Instance } from '../domain/instance.ts';
import type { EngineEvent } from '../domain/messages.ts';
import type { EngineSession } from '../engines/engine.ts';
import { SessionStatusTracker } from '../events/session-status.ts';
import { SqlAuthStateStore } from '../store/engine-auth.ts';
import { RetryingAuthStateStore } from './auth-retry.ts';
import type { RecordBacklog } from './backlog.ts';
import type { SessionManagerOptions } from './manager-options.ts';
import { type RecordRetryPolicy, recordWithRetry } from './record-retry.ts';

/** What the session manager shares with every session it makes. */
export interface SessionShared {
  /** Retry of a failed recording and of a credential read or write (docs/decisions/0011-store-faults.md). */
  policy: RecordRetryPolicy;
  /** Aborted at shutdown: recordings and credential reads waiting for the store give up. */
  signal: AbortSignal;
  /** The process's backlog of events waiting to be recorded; each waiting event counts in it. */
  backlog: RecordBacklog;
}

/**
 * A new engine session of `instance`, not registered anywhere, with the context every engine gets
 * (docs/decisions/0024-engines-and-data-flow.md): its credentials in the store (sealed, retried while the store is
 * away), its events recorded through `options.recorder` with retry (without limit while the store cannot be reached,
 * docs/decisions/0011-store-faults.md), and the session status events derived from its connection states
 * (docs/decisions/0012-session-and-message-status-events.md).
 */
export function createEngineSession(
  options: SessionManagerOptions,
  instance: Instance,
  { policy, signal, backlog }: SessionShared,
): EngineSession {
  const { db, box, engines, recorder, logger, clock, findMessage, callSettings, turn } = options;
  const instanceId = instance.id;
  const sessionLogger = logger.child({ instanceId });
  // Failures are logged by recordWithRetry (the first, every tenth, and the one given up on).
  const record = (event: EngineEvent) => recorder.record(instanceId, event);
  const auth = new SqlAuthStateStore(db, box, instanceId, turn);
  const retrying = async (event: EngineEvent): Promise<void> => {
    const left = backlog.enter();
    try {
      await recordWithRetry({ emit: record, logger: sessionLogger }, event, policy, { signal });
    } finally {
      left();
    }
  };
  // Session status events are derived here, in one place for every engine, from the connection states the
  // engine reports (docs/decisions/0012-session-and-message-status-events.md).
  const statuses = new SessionStatusTracker({ connected: false, loggedIn: instance.jid !== null });
  return engines[instance.env].createSession({
    instanceId,
    env: instance.env,
    auth: new RetryingAuthStateStore(auth, policy, sessionLogger, signal),
    // Every engine's events are recorded with the same retry: without limit while the store cannot be reached
    // (docs/decisions/0011-store-faults.md); each counts in the backlog while it waits.
    emit: async (event: EngineEvent) => {
      const status = event.type === 'connection' ? statuses.next(event.state, clock()) : null;
      // Both recordings start in this tick, so the status is queued right after its connection event and
      // normally commits in the same transaction.
      await Promise.all([retrying(event), ...(status ? [retrying(status)] : [])]);
    },
    waiting: () => backlog.enter(),
    findMessage: (id) => findMessage(instanceId, id),
    ...(callSettings ? { callSettings: () => callSettings(instanceId) } : {}),
    logger: sessionLogger,
    clock,
  });
}
