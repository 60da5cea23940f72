import type { EngineEvent } from '../domain/messages.ts';
import type { EventRecorder } from '../events/recorder.ts';
import type { ReportedWrite, SendStatusReport } from './queue-deps.ts';

/**
 * Records what the send queue reports as events of the instance
 * (docs/decisions/0012-session-and-message-status-events.md): a send's outcome as `MessageStatus`, a pause or resume
 * of the queue as `SessionStatus`.
 * @throws the recorder's error (the queue logs it).
 */
export async function recordSendStatus(
  recorder: EventRecorder,
  instanceId: string,
  report: SendStatusReport,
): Promise<void> {
  await recorder.record(instanceId, statusEvent(report));
}

/**
 * Runs the send queue's `write` in the recorder's transaction with the events of the reports it returns
 * (docs/decisions/0076-status-with-its-write.md): the job's change and its `MessageStatus` event commit together,
 * with the other events the write returns after them.
 * @returns the write's result, once committed.
 * @throws the write's, a projection's or the store's error (nothing of it kept).
 */
export function recordWithStatus<T>(
  recorder: EventRecorder,
  instanceId: string,
  write: ReportedWrite<T>,
): Promise<T> {
  return recorder.recordWith(instanceId, async (trx) => {
    const { result, reports, events = [] } = await write(trx);
    return { result, events: [...reports.map(statusEvent), ...events] };
  });
}

/** The engine event recording `report`: `messageStatus` for a send's outcome, `sessionStatus` for a pause or resume. */
function statusEvent(report: SendStatusReport): EngineEvent {
  if (report.kind === 'message') {
    return {
      type: 'messageStatus',
      id: report.id,
      status: report.status,
      ...(report.error === undefined ? {} : { error: report.error }),
      at: report.at,
    };
  }
  return {
    type: 'sessionStatus',
    status: report.status,
    ...(report.reason === undefined ? {} : { reason: report.reason }),
    ...(report.until === undefined ? {} : { until: report.until }),
    at: report.at,
  };
}
