/**
 * Calls (docs/decisions/0026-chats-edits-polls-and-calls.md): what an engine reports about a voice or video call to
 * the account, and the per-instance call handling. Times are epoch milliseconds.
 */
import type { Jid } from './messages.ts';

/**
 * What happened to a call: `offer` (it rings), `missed` (the caller hung up, or it timed out, before it was
 * answered), `rejected` (declined: by parley's automatic reject or on another device of the account), `accepted`
 * (answered on another device of the account).
 */
export type CallStatus = 'offer' | 'missed' | 'rejected' | 'accepted';

/** One call event as an engine reports it. */
export interface EngineCall {
  /** The platform's call id (the same on every event of one call). */
  id: string;
  /** The caller's phone JID (`<phone>@s.whatsapp.net`), or a LID when it could not be resolved. */
  from: Jid;
  status: CallStatus;
  isVideo: boolean;
  isGroup: boolean;
  /** Epoch milliseconds of the event. */
  timestamp: number;
  /** True when the account rejected the call automatically (only with status `rejected`). */
  autoRejected?: true;
}

/** The call handling of an instance: reject every incoming call, then send `message` to the caller (null: none). */
export interface CallSettings {
  reject: boolean;
  message: string | null;
}

/**
 * Longest auto-reject message, in characters (the text message limit,
 * docs/decisions/0001-envelope-and-error-codes.md).
 */
export const MAX_CALL_MESSAGE = 65_536;
