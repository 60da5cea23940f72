import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineEvent, EngineMessage, Jid } from '../domain/messages.ts';
import { phoneOfJid, userJid } from '../domain/messages.ts';
import { advanceDeliveryState, applyMessageUpdate, insertMessage, touchPeer } from '../store/messages.ts';
import type { Database } from '../store/schema.ts';
import type { EventProjection } from './recorder.ts';

/**
 * The message store as a projection of engine events (docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0017-messages-and-media.md), applied in the recorder's transaction so a message row commits together
 * with its outbox row:
 * - `message`: stores the message — `sent` when the account sent it, `delivered` when it arrived — and records
 *   the user it was exchanged with (the chat's user, or the sender of a group message from someone else);
 * - `history`: the same for every message of the synced chats;
 * - `receipt`: moves the acknowledged messages forward (`delivered` → `read` → `played`), never backwards. In a
 *   group the first member's receipt moves the message (the platform's per-member receipts are not kept);
 * - `read`: moves the received messages the account read (in that chat, not its own) to `read`;
 * - `messageUpdate`: an edit replaces the stored text, a deletion for everyone drops it
 * (docs/decisions/0026-chats-edits-polls-and-calls.md).
 */
export class MessageProjection implements EventProjection {
  readonly name = 'messages';
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    const at = new Date(this.#clock()).toISOString();
    switch (event.type) {
      case 'message':
        await this.#store(trx, instanceId, event.message, at);
        return;
      case 'history':
        for (const chat of event.chats) {
          for (const message of chat.messages) await this.#store(trx, instanceId, message, at);
        }
        return;
      case 'receipt':
        await advanceDeliveryState(trx, instanceId, event.messageIds, event.state, at);
        return;
      case 'read':
        await advanceDeliveryState(trx, instanceId, event.messageIds, 'read', at, {
          chat: event.chat,
          fromMe: false,
        });
        return;
      case 'messageUpdate':
        await applyMessageUpdate(trx, instanceId, event.update);
        return;
      default:
        return;
    }
  }

  async #store(trx: Transaction<Database>, instanceId: string, message: EngineMessage, at: string) {
    await insertMessage(trx, instanceId, message, message.source.isFromMe ? 'sent' : 'delivered', at);
    const peer = peerOf(message);
    if (peer) await touchPeer(trx, instanceId, peer.jid, peer.pushName, at);
  }
}

/**
 * The user a message was exchanged with, if any: the other party of a one-to-one chat, or the sender of a group
 * message from someone else; its display name only when the message is the user's own. Non-user chats
 * (broadcast lists, status) have none.
 */
export function peerOf(message: EngineMessage): { jid: Jid; pushName: string } | null {
  const { chat, sender, isFromMe, isGroup } = message.source;
  if (isGroup && isFromMe) return null;
  const phone = phoneOfJid(isGroup ? sender : chat);
  if (phone === null) return null;
  return { jid: userJid(phone), pushName: isFromMe ? '' : message.pushName };
}
