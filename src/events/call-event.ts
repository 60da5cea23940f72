import type { CallStatus, EngineCall } from '../domain/calls.ts';

/**
 * `event` of a `Call` webhook (docs/decisions/0026-chats-edits-polls-and-calls.md): one per call status change.
 * `callId` is the same on every event of one call; `from` is the caller's phone JID; `timestamp` RFC 3339 UTC;
 * `autoRejected` is true on the `rejected` event of a call the instance's call settings rejected, false otherwise.
 */
export interface CallEvent {
  callId: string;
  from: string;
  status: CallStatus;
  isVideo: boolean;
  isGroup: boolean;
  autoRejected: boolean;
  timestamp: string;
}

/** The `Call` webhook `event` of an engine call event. Pure. */
export function callEvent(call: EngineCall): CallEvent {
  return {
    callId: call.id,
    from: call.from,
    status: call.status,
    isVideo: call.isVideo,
    isGroup: call.isGroup,
    autoRejected: call.autoRejected === true,
    timestamp: new Date(call.timestamp).toISOString(),
  };
}
