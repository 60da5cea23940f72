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
  const auth = new SqlAuthStateStore(db, box, instanceId, turn);
  /**
   * Records `event` and the session status it means (if any) as one item of the recorder, so both commit in one
   * transaction or neither does (docs/decisions/0076-status-with-its-write.md): a connection change the instance
   * row keeps is never left without its `SessionStatus` (nor a logout without the cancel of its pending sends,
   * docs/decisions/0074-logout-cancels-pending-sends.md). Failures are logged by recordWithRetry (the first, every
   * tenth, and the one given up on).
   */
  const retrying = async (event: EngineEvent, status: EngineEvent | null): Promise<void> => {
    const record = (first: EngineEvent) =>
      status === null
        ? recorder.record(instanceId, first)
        : recorder.recordWith(instanceId, async () => ({ result: undefined, events: [first, status] }));
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
  /** The recording of the session's last connection state (settled: a failure was its caller's). */
  let connections: Promise<void> = Promise.resolve();
  return engines[instance.env].createSession({
    instanceId,
    env: instance.env,
    auth: new RetryingAuthStateStore(auth, policy, sessionLogger, signal),
    // Every engine's events are recorded with the same retry: without limit while the store cannot be reached
    // (docs/decisions/0011-store-faults.md); each counts in the backlog while it waits.
    emit: (event: EngineEvent): Promise<void> => {
      if (event.type !== 'connection') return retrying(event, null);
      // The status is recorded with its connection event, in the same transaction (never one without the other);
      // the tracker moves on only once both are stored, so a state whose recording failed is reported again. One
      // connection state at a time, in the order emitted, each compared with the one recorded before it.
      const recorded = connections.then(async () => {
        await retrying(event, statuses.peek(event.state, clock()));
        statuses.accept(event.state);
      });
      connections = recorded.catch(() => undefined);
      return recorded;
    },
    waiting: () => backlog.enter(),
    findMessage: (id) => findMessage(instanceId, id),
    ...(callSettings ? { callSettings: () => callSettings(instanceId) } : {}),
    logger: sessionLogger,
    clock,
  });
}
