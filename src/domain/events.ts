import type { EngineCall } from './calls.ts';
import type { ChatLabelChange, LabelEdit } from './labels.ts';
import type { LidMapping } from './lids.ts';
import type {
  ConnectionState,
  Contact,
  DeliveryState,
  EngineMessage,
  HistoryChat,
  Jid,
  MessageSource,
  MessageUpdate,
  PollVote,
  SessionStatusKind,
} from './messages.ts';

/**
 * Events an engine emits. Engines only translate: the session manager, the message store and the webhook
 * outbox subscribe to these (docs/decisions/0024-engines-and-data-flow.md).
 */
export type EngineEvent =
  | { type: 'connection'; state: ConnectionState }
  | {
      type: 'message';
      message: EngineMessage;
      /**
       * The message may have been handed over before, so the recorder looks it up among the stored ones
       * (src/events/message-copies.ts): delivered offline after a connect (Baileys' `append` upserts: its
       * acknowledgement lost when a socket dropped, or left unacknowledged at a node's hand-over), or one whose first
       * delivery could not be decrypted (the sender's resend and the phone's placeholder resend may both come).
       * Absent: a first delivery.
       */
      mayRepeat?: true;
    }
  | {
      type: 'receipt';
      state: Exclude<DeliveryState, 'sent'>;
      messageIds: string[];
      source: MessageSource;
      /** Epoch milliseconds. */
      timestamp: number;
    }
  | { type: 'presence'; source: MessageSource; state: 'composing' | 'paused'; media: '' | 'audio' }
  /**
   * The account marked received messages of `chat` as read (it sent their read receipts): they move to `read`.
   * Recorded by the messaging service after the engine's call; no webhook is sent for it
   * (docs/api.md#webhook-events).
   */
  | { type: 'read'; chat: Jid; messageIds: string[] }
  | { type: 'history'; syncType: string; progress: number; chats: HistoryChat[] }
  | { type: 'contacts'; contacts: Contact[] }
  /**
   * A voice or video call to the account rang, was missed, rejected or answered elsewhere
   * (docs/decisions/0026-chats-edits-polls-and-calls.md).
   */
  | {
      type: 'call';
      call: EngineCall;
      /**
       * The step of the call this event reports, as `call/<call id>/offer` (it rang) or `call/<call id>/end` (its end:
       * missed, rejected or accepted; a call ends once): a repeat of the step is left out (src/events/message-copies.ts),
       * as `messageUpdate`'s, so a call notification the platform hands over again, even to a process started since,
       * makes no second event. Set by the live engine; absent for the sandbox's calls.
       */
      platformId?: string;
    }
  | {
      type: 'group';
      update: GroupUpdate;
      /**
       * The platform notification the change came in, as `<notification id>/<index of the change in it>`: a repeat
       * of it is left out (src/events/message-copies.ts), as `messageUpdate`'s. Absent for the account's own
       * changes through the API and the sandbox's.
       */
      platformId?: string;
    }
  /** A message was edited or deleted for everyone (by the account through the API, or by someone else). */
  | {
      type: 'messageUpdate';
      update: MessageUpdate;
      /**
       * The id of the platform message the update came in (its `protocolMessage`): a repeat of it is left out
       * (src/events/message-copies.ts). Absent for the account's own change through the API and the sandbox's.
       */
      platformId?: string;
    }
  /** A vote on one of the account's polls, decrypted. */
  | {
      type: 'pollVote';
      vote: PollVote;
      /** The id of the platform message the vote came in (its `pollUpdateMessage`), as `messageUpdate`'s. */
      platformId?: string;
    }
  /**
   * The session's status changed (webhook `SessionStatus`): derived from `connection` events by the session
   * manager (src/events/session-status.ts), `paused` / `resumed` recorded by send pacing. `reason` in words;
   * `until` when a pause or restriction ends, epoch ms; `at` when it happened, epoch ms.
   */
  | {
      type: 'sessionStatus';
      status: SessionStatusKind;
      reason?: string;
      until?: number /* epoch ms */;
      at: number /* epoch ms */;
    }
  /**
   * A send reached its final outcome (webhook `MessageStatus`): `sent` (the platform took it), `failed` (with
   * `error`), `canceled`. `id` is the message id the send answered; `at` epoch ms.
   */
  | {
      type: 'messageStatus';
      id: string;
      status: 'sent' | 'failed' | 'canceled';
      error?: string;
      at: number /* epoch ms */;
    }
  /**
   * The platform told the account which phone number is behind one or more LIDs (Baileys' `lid-mapping.update`,
   * a message that carried both forms, the sandbox's simulated users). Recorded into `lid_mappings`, no webhook
   * (docs/decisions/0038-lid-mappings.md).
   */
  | { type: 'lid-mapping'; mappings: LidMapping[] }
  /**
   * A label of the account was created, changed or deleted (Baileys' `labels.edit` from a `label_edit` app state
   * mutation, or the account's own change through the API). Recorded into `labels`, no webhook
   * (docs/decisions/0045-business-labels.md).
   */
  | { type: 'label'; label: LabelEdit }
  /**
   * A chat was labelled or unlabelled (Baileys' `labels.association` from a `label_jid` mutation, or the account's
   * own change). Recorded into `chat_labels`, no webhook (docs/decisions/0045-business-labels.md).
   */
  | { type: 'chat-label'; change: ChatLabelChange };

/**
 * What changed in a group (the platform's `w:gp2` notifications; Baileys' `group-participants.update` and
 * `groups.update`): `join` / `leave` are an add / remove whose only participant is the actor.
 */
export type GroupUpdateAction =
  | 'add'
  | 'remove'
  | 'join'
  | 'leave'
  | 'promote'
  | 'demote'
  | 'subject'
  | 'description'
  | 'announce'
  | 'locked'
  | 'ephemeral';

/**
 * One change of a group made by anyone (the account included). JIDs are phone JIDs when they can be resolved
 * (docs/decisions/0025-live-engine.md). Exactly the field of the action is set: `name` for `subject`, `topic` for
 * `description`, `isAnnounce`, `isLocked`, `disappearingTimer` (seconds, 0 = off) for the settings; `participants` is
 * empty for setting changes.
 */
export interface GroupUpdate {
  groupJid: Jid;
  action: GroupUpdateAction;
  /** Who made the change; null when the platform does not say. */
  actor: Jid | null;
  participants: Jid[];
  /** Epoch milliseconds. */
  timestamp: number;
  name?: string;
  topic?: string;
  isAnnounce?: boolean;
  isLocked?: boolean;
  disappearingTimer?: number;
}

/**
 * What a log line may say about an event (docs/decisions/0023-operations.md: never a body): its type and the message
 * id(s), the chat for receipts and presences, counts for history chunks and contact batches.
 */
export function eventLogFields(event: EngineEvent): Record<string, unknown> {
  switch (event.type) {
    case 'message':
      return { event: event.type, id: event.message.id, chat: event.message.source.chat };
    case 'receipt':
      return { event: event.type, ids: event.messageIds, chat: event.source.chat, state: event.state };
    case 'presence':
      return { event: event.type, chat: event.source.chat };
    case 'read':
      return { event: event.type, ids: event.messageIds, chat: event.chat };
    case 'history':
      return {
        event: event.type,
        syncType: event.syncType,
        chats: event.chats.length,
        messages: event.chats.reduce((n, chat) => n + chat.messages.length, 0),
      };
    case 'contacts':
      return { event: event.type, contacts: event.contacts.length };
    case 'call':
      return { event: event.type, id: event.call.id, status: event.call.status };
    case 'messageUpdate':
      return { event: event.type, id: event.update.messageId, chat: event.update.source.chat };
    case 'pollVote':
      return { event: event.type, id: event.vote.pollId, chat: event.vote.source.chat };
    case 'connection':
      return { event: event.type };
    case 'sessionStatus':
      return { event: event.type, status: event.status };
    case 'messageStatus':
      return { event: event.type, id: event.id, status: event.status };
    case 'group':
      return { event: event.type, chat: event.update.groupJid, action: event.update.action };
    case 'lid-mapping':
      return { event: event.type, mappings: event.mappings.length };
    case 'label':
      return { event: event.type, label: event.label.id, deleted: event.label.deleted };
    case 'chat-label':
      return {
        event: event.type,
        chat: event.change.chat,
        label: event.change.labelId,
        labeled: event.change.labeled,
      };
  }
}
