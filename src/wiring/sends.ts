import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import type { EventRecorder } from '../events/recorder.ts';
import { SendQueue } from '../sends/queue.ts';
import { recordSendStatus, recordWithStatus } from '../sends/status-events.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';

/**
 * The send queue of the instances this node holds (docs/decisions/0009-sends-as-jobs.md): relays through the
 * sessions, records each outcome as a `MessageStatus` event, and follows the recorder (a login wakes it). Started
 * when `start` is true.
 */
export function wireSendQueue(deps: {
  store: Store;
  sessions: SessionManager;
  recorder: EventRecorder;
  nodeId: string;
  clock: Clock;
  /**
   * The node's store clock (its `StoreClock`'s `now`), jobs' due times are set and judged on
   * (docs/decisions/0112-send-due-times-on-the-store-clock.md).
   */
  storeClock: Clock;
  logger: FastifyBaseLogger;
  start: boolean;
}): SendQueue {
  const { sessions, recorder } = deps;
  const sendQueue = new SendQueue({
    db: deps.store.db,
    session: (instanceId) => sessions.existing(instanceId),
    nodeId: deps.nodeId,
    clock: deps.clock,
    storeClock: deps.storeClock,
    logger: deps.logger,
    report: (instanceId, report) => recordSendStatus(recorder, instanceId, report),
    recordWith: (instanceId, write) => recordWithStatus(recorder, instanceId, write),
  });
  recorder.use(sendQueue);
  if (deps.start) sendQueue.start();
  return sendQueue;
}
