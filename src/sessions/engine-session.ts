import type { Kysely, Transaction } from 'kysely';
import type { Instance } from '../domain/instance.ts';
import type { ConnectionState, EngineEvent } from '../domain/messages.ts';
import type { AuthEntry, EngineSession, EngineSessionContext } from '../engines/engine.ts';
import { SessionStatusTracker } from '../events/session-status.ts';
import { SqlAuthStateStore } from '../store/engine-auth.ts';
import type { LeaseFence } from '../store/leases.ts';
import { findLidMappingByLid, findLidPhones } from '../store/lid-mappings.ts';
import type { Database } from '../store/schema.ts';
import { RetryingAuthStateStore } from './auth-retry.ts';
import type { RecordBacklog } from './backlog.ts';
import type { SessionManagerOptions } from './manager-options.ts';
import { RecordLine } from './record-line.ts';
import type { RecordRetryPolicy } from './record-retry.ts';

/** What the session manager shares with every session it makes. */
export interface SessionShared {
  /** Retry of a failed recording and of a credential read or write (docs/decisions/0011-store-faults.md). */
  policy: RecordRetryPolicy;
  /** Aborted at shutdown: recordings and credential reads waiting for the store give up. */
  signal: AbortSignal;
  /**
   * This session's own, aborted when it is released (its instance's lease lost or handed over,
   * docs/decisions/0008-leases-and-fencing.md): its credential writes stop without another try (its recordings go
   * on: the events they hold were acknowledged to the platform).
   */
  released?: AbortSignal;
  /** The process's backlog of events waiting to be recorded; each waiting event counts in it. */
  backlog: RecordBacklog;
  /**
   * With several nodes, the lease this session is made under (docs/decisions/0008-leases-and-fencing.md): its key
   * writes land only while the instance's lease still carries it (src/store/engine-auth.ts).
   */
  fence?: LeaseFence | undefined;
}

/**
 * A new engine session of `instance`, not registered anywhere, with the context every engine gets
 * (docs/decisions/0024-engines-and-data-flow.md): its credentials in the store (sealed, retried while the store is
 * away), its events recorded through `options.recorder` with retry (without limit while the store cannot be reached,
 * docs/decisions/0011-store-faults.md), in the order emitted even across failures (src/sessions/record-line.ts),
 * and the session status events derived from its connection states
 * (docs/decisions/0012-session-and-message-status-events.md).
 */
export function createEngineSession(
  options: SessionManagerOptions,
  instance: Instance,
  { policy, signal, released, backlog, fence }: SessionShared,
): EngineSession {
  const { db, box, engines, recorder, logger, clock, findMessage, callSettings, turn } = options;
  const instanceId = instance.id;
  const sessionLogger = logger.child({ instanceId });
  const auth = new SqlAuthStateStore(db, box, instanceId, { turn, fence });
  /** The engine's auth port: the store's, with its reads and writes retried while the store is away. */
  const keys = new RetryingAuthStateStore(auth, policy, sessionLogger, signal, released);
  /**
   * The session's recordings in emission order across store failures (src/sessions/record-line.ts). A release does
   * not stop those of events alone: the platform was told of the events they hold (acknowledged), so they wait out
   * the store until shutdown (docs/decisions/0011-store-faults.md), and a late one overwrites nothing (a message
   * stored twice is kept once, a copy makes no second event, src/events/message-copies.ts). An item that also writes
   * engine state (`emitWith`) stops with the key writes: the new owner writes that state from then on.
   */
  const line = new RecordLine(policy, sessionLogger, { signal });
  /**
   * Runs `record` with the retry of every recording (docs/decisions/0011-store-faults.md: without limit while the
   * store cannot be reached; `event` names the item in the retry's log lines), after every recording of the session
   * emitted before it, counted in the backlog while it waits. When it is given up, the recorder's projections are
   * told of each of the item's `events` (`EventRecorder.unrecorded`: a login whose state was not recorded still
   * wakes the send queue, docs/decisions/0009-sends-as-jobs.md) before its error is raised.
   * @throws as `RecordLine.record` (src/sessions/record-line.ts).
   */
  const retried = async (
    record: (event: EngineEvent) => Promise<void>,
    event: EngineEvent,
    stopOn?: AbortSignal,
    events: readonly EngineEvent[] = [event],
  ): Promise<void> => {
    const left = backlog.enter();
    try {
      await line.record(() => record(event), event, stopOn);
    } catch (error) {
      for (const each of events) recorder.unrecorded(instanceId, each);
      throw error;
    } finally {
      left();
    }
  };
  /**
   * The events a transaction records for `events`, whose first is `first`: for a connection state, the session status
   * it means (if any) right after it. Compared, when the item is applied in the instance's order, with the state
   * before it: one applied earlier in the same transaction (not yet stored) or the last one stored.
   */
  const withStatus = (
    trx: Transaction<Database>,
    first: EngineEvent,
    events: readonly EngineEvent[],
  ): EngineEvent[] => {
    if (first.type !== 'connection') return [...events];
    const status = statuses.peek(first.state, clock(), inTransaction.get(trx));
    inTransaction.set(trx, first.state);
    const [, ...rest] = events;
    return status === null ? [first, ...rest] : [first, status, ...rest];
  };
  /**
   * Records `event` and the session status it means (if any) as one item of the recorder, so both commit in one
   * transaction or neither does (docs/decisions/0076-status-with-its-write.md): a connection change the instance
   * row keeps is never left without its `SessionStatus` (nor a logout without the cancel of its pending sends,
   * docs/decisions/0074-logout-cancels-pending-sends.md). Failures are logged by recordWithRetry (the first, every
   * tenth, and the one given up on), which the session's line runs (src/sessions/record-line.ts).
   */
  const retrying = async (event: EngineEvent): Promise<void> => {
    const record = (first: EngineEvent) =>
      first.type !== 'connection'
        ? recorder.record(instanceId, first)
        : recorder
            .recordWith(instanceId, async (trx) => ({
              result: undefined,
              events: withStatus(trx, first, [first]),
            }))
            // Remembered as soon as it is stored, before the recorder applies the instance's next item.
            .then(() => statuses.accept(first.state));
    await retried(record, event);
  };
  /**
   * Writes `entries` to the instance's keys and records `events` as one item of the recorder, in one transaction
   * (docs/decisions/0077-state-with-its-events.md), with the retry of every recording: a store that cannot be
   * reached is waited out, and the item tried again writes the same values (sealed once, here). A connection state
   * may be the first event only (a login kept with its credentials and the events that follow it); its session
   * status is recorded with it, as {@link retrying} records it.
   */
  const emitWith = async (entries: readonly AuthEntry[], events: readonly EngineEvent[]): Promise<void> => {
    const [first, ...rest] = events;
    // A connection state's status is derived with it, from the state before it: one per item, and first.
    if (rest.some((event) => event.type === 'connection'))
      throw new Error('emitWith records a connection state only as its first event');
    if (first === undefined) {
      await keys.set(entries);
      return;
    }
    const write = auth.writer(entries);
    const record = () => {
      const recorded = recorder.recordWith(instanceId, async (trx) => {
        await write(trx);
        return { result: undefined, events: withStatus(trx, first, events) };
      });
      // A connection state is remembered as soon as it is stored, before the recorder applies the next item.
      return first.type === 'connection' ? recorded.then(() => statuses.accept(first.state)) : recorded;
    };
    // The first event names the item in the retry's log lines. It writes engine state: a released session's new
    // owner writes that from then on, so the item stops with the session's key writes (releasedError).
    await retried(record, first, released, events);
  };
  // Session status events are derived here, in one place for every engine, from the connection states the
  // engine reports (docs/decisions/0012-session-and-message-status-events.md).
  const statuses = new SessionStatusTracker({ connected: false, loggedIn: instance.jid !== null });
  /** The last connection state each transaction applied, not yet stored (a batch may hold several). */
  const inTransaction = new WeakMap<Transaction<Database>, ConnectionState>();
  return engines[instance.env].createSession({
    instanceId,
    env: instance.env,
    auth: keys,
    // Every engine's events are recorded with the same retry: without limit while the store cannot be reached
    // (docs/decisions/0011-store-faults.md); each counts in the backlog while it waits.
    // A connection state is queued in the recorder at once, in the order emitted among all the session's events;
    // its status is recorded with it, in the same transaction (never one without the other), and the tracker moves
    // on only once both are stored, so a state whose recording failed is compared and reported again.
    emit: retrying,
    emitWith,
    waiting: () => backlog.enter(),
    findMessage: (id) => findMessage(instanceId, id),
    ...keptPairReads(db, instanceId),
    ...(callSettings ? { callSettings: () => callSettings(instanceId) } : {}),
    logger: sessionLogger,
    clock,
  });
}

/**
 * The reads of the phone↔LID pairs `instanceId` keeps (`lid_mappings`, docs/decisions/0038-lid-mappings.md) an engine
 * session's context offers: one LID's phone by its key, and many LIDs' phones in one statement (per 500 LIDs).
 */
export function keptPairReads(
  db: Kysely<Database>,
  instanceId: string,
): Required<Pick<EngineSessionContext, 'keptLidPhone' | 'keptLidPhones'>> {
  return {
    keptLidPhone: async (lid) => (await findLidMappingByLid(db, instanceId, lid))?.phone,
    keptLidPhones: (lids) => findLidPhones(db, instanceId, lids),
  };
}
