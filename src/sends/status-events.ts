import type { EventRecorder } from '../events/recorder.ts';
import type { SendStatusReport } from './queue.ts';

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
  if (report.kind === 'message') {
    await recorder.record(instanceId, {
      type: 'messageStatus',
      id: report.id,
      status: report.status,
      ...(report.error === undefined ? {} : { error: report.error }),
      at: report.at,
    });
    return;
  }
  await recorder.record(instanceId, {
    type: 'sessionStatus',
    status: report.status,
    ...(report.reason === undefined ? {} : { reason: report.reason }),
    ...(report.until === undefined ? {} : { until: report.until }),
    at: report.at,
  });
}
