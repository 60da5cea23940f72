import type { BaileysEventMap, BinaryNode, GroupMetadata, WAMessage } from 'baileys';
import { isJidBroadcast, isJidGroup, isJidNewsletter, proto } from 'baileys';
import { type EngineEvent, eventLogFields, type Jid } from '../../domain/messages.ts';
import type { EngineSessionContext } from '../engine.ts';
import type { BoundedCache } from './cache.ts';
import type { ContactBook } from './contacts.ts';
import { groupUpdatesFromNotification } from './group-events.ts';
import { markAdminDeletion } from './group-revokes.ts';
import { keepGroup, learnGroupPairs } from './groups.ts';
import {
  historyFromSet,
  type MappingContext,
  presenceFromChatstate,
  receiptsFromGroupUpdates,
  receiptsFromUpdates,
  toEngineMessage,
} from './incoming.ts';
import type { JidResolver } from './jid.ts';
import { chatLabelEventOf, labelEventOf } from './labels.ts';
import type { SocketLike } from './socket.ts';
import { updateEventOf } from './updates.ts';

/**
 * The serial queue of one session's platform-driven work (docs/decisions/0005-outbox-and-delivery.md: events of an
 * instance are recorded in arrival order). Each task runs after every earlier one; a task's failure is logged and
 * never stops the queue. Events are recorded one at a time; the session side retries a store that cannot be reached
 * without limit (docs/decisions/0011-store-faults.md), so a task waits there and the tasks behind it wait in order.
 * Queued tasks count in the process's backlog of events waiting to be recorded (`context.waiting`).
 */
export class IncomingQueue {
  readonly #context: EngineSessionContext;
  readonly #pairsFirst: () => Promise<void>;
  #tail: Promise<void> = Promise.resolve();

  /**
   * @param pairsFirst records the LID pairs learned and not recorded yet (src/engines/baileys/lids.ts
   *   `LearnedLids.recordPending`); {@link record} runs it before any other event. Default: nothing.
   */
  constructor(context: EngineSessionContext, pairsFirst: () => Promise<void> = async () => undefined) {
    this.#context = context;
    this.#pairsFirst = pairsFirst;
  }

  /** Runs `task` after every earlier task; a rejection is logged at error level with `what` (the event name). */
  enqueue(task: () => Promise<void>, what: string): void {
    const left = this.#context.waiting?.();
    this.#tail = this.#tail
      .then(() => {
        left?.();
        return task();
      })
      .catch((error: unknown) => {
        left?.();
        this.#context.logger.error({ err: error, event: what }, 'handling a platform event failed');
      });
  }

  /** Resolves once every task queued so far has finished (shutdown). */
  drained(): Promise<void> {
    return this.#tail;
  }

  /**
   * Records one platform-driven event through `context.emit`; never rejects. `emit` retries a store that cannot
   * be reached without limit, so it fails only on a permanent store error (a constraint or data error: a bug)
   * or at shutdown; the event is then not recorded and is logged at error level with its type and message id(s),
   * no body (docs/decisions/0023-operations.md). Resolves true when recorded.
   *
   * Any event but a `lid-mapping` one is recorded after the LID pairs learned so far (mapping this very event
   * included): the pair is stored, and the LID's chat moved to its phone JID, before an event naming that phone JID
   * for the user looks for the chat's messages (docs/decisions/0038-lid-mappings.md).
   */
  async record(event: EngineEvent): Promise<boolean> {
    if (event.type !== 'lid-mapping') await this.#pairsFirst();
    try {
      await this.#context.emit(event);
      return true;
    } catch (error) {
      this.#context.logger.error(
        { err: error, ...eventLogFields(event) },
        'a platform event was not recorded: permanent store error or shutdown',
      );
      return false;
    }
  }
}

/** The frame event Baileys emits for every `<notification type="w:gp2">` (group changes, by anyone). */
const GROUP_NOTIFICATION = 'CB:notification,type:w:gp2';

/** What {@link attachListeners} needs from the session. */
export interface ListenerDeps {
  context: EngineSessionContext;
  mapping: MappingContext;
  resolver: JidResolver;
  contacts: ContactBook;
  /** Group metadata cache (Baileys' `cachedGroupMetadata`), refreshed from group events. */
  groups: BoundedCache;
  /**
   * Ids of messages whose first delivery could not be decrypted (session-options.ts `SessionCaches.undecrypted`): the
   * session's, not the socket's, since their resends may come after the connection was renewed.
   */
  undecrypted: BoundedCache;
  /**
   * Group `jid`'s metadata fetched through the session's current socket and kept in `groups` (undefined while no
   * socket is open), to tell whether a deletion's sender is an admin (group-revokes.ts). @throws the socket's error.
   */
  fetchGroup(jid: string): Promise<GroupMetadata | undefined>;
  /**
   * Aborted when the session stops (close, disconnect, logout, a lost lock): a group metadata read for a deletion
   * gives up at once (group-revokes.ts), so it does not hold the queue a stop waits for. Absent: never.
   */
  stopping?: AbortSignal;
  queue: IncomingQueue;
  subscribePresence(sock: SocketLike, jid: Jid): void;
  /** Handles the socket's call events (calls.ts); absent: calls are ignored. */
  calls?(sock: SocketLike, calls: BaileysEventMap['call']): Promise<void>;
}

/**
 * Longest notification id a group change carries as its `platformId` (with `/<index>` it fits `recorded_updates.id`,
 * 128 characters); a longer one, which the platform does not send, is recorded without it.
 */
const MAX_NOTIFICATION_ID = 100;

/**
 * Subscribes to a socket's events and turns them into domain events (docs/decisions/0025-live-engine.md): messages,
 * 1:1 and group receipts, history sync, contacts, chat presence (`CB:chatstate` frames), group changes (`w:gp2`
 * notifications → `group` events), labels from app state sync (`labels.edit` / `labels.association` → `label` /
 * `chat-label` events, docs/decisions/0045-business-labels.md), group-metadata cache upkeep. Every handler runs
 * on `deps.queue` in arrival order; each event of a batch is recorded on its own. Returns the detach.
 */
export function attachListeners(sock: SocketLike, deps: ListenerDeps): () => void {
  const { context, mapping: ctx, queue } = deps;
  const detachers: (() => void)[] = [];
  const now = () => context.clock();
  const { undecrypted } = deps;
  const on = <E extends keyof BaileysEventMap>(
    event: E,
    handle: (arg: BaileysEventMap[E]) => Promise<void>,
  ) => {
    const listener = (arg: BaileysEventMap[E]) => queue.enqueue(() => handle(arg), event);
    sock.ev.on(event, listener);
    detachers.push(() => sock.ev.off(event, listener));
  };
  const lidListener = (mapping: BaileysEventMap['lid-mapping.update']) => {
    deps.resolver.remember(mapping.lid, mapping.pn);
  };
  sock.ev.on('lid-mapping.update', lidListener);
  detachers.push(() => sock.ev.off('lid-mapping.update', lidListener));
  /**
   * Edits, revokes and poll votes (docs/decisions/0026-chats-edits-polls-and-calls.md): recorded as their own events;
   * true when `msg` was one.
   */
  const recordUpdate = async (msg: WAMessage): Promise<boolean> => {
    let event: Awaited<ReturnType<typeof updateEventOf>>;
    try {
      event = await updateEventOf(msg, ctx, { auth: context.auth, now: now() });
    } catch (error) {
      // The auth store tried the poll's secret as a recording is tried (docs/decisions/0011-store-faults.md): what
      // reaches here is a permanent error, an unknown one tried out, or the shutdown; logged as a recording given up.
      context.logger.error(
        { err: error, event: 'messageUpdate', id: msg.key.id },
        'an update was not recorded: reading what it needs failed (permanent store error, retries spent or shutdown)',
      );
      return true;
    }
    if (event === null) return false;
    if (event === 'undecryptable') {
      context.logger.warn(
        { event: 'pollVote', id: msg.key.id },
        'a poll vote could not be decrypted; dropped',
      );
      return true;
    }
    // Whether the update may change its message (its sender's, or in a group an admin's deletion; the message not
    // deleted already) is decided where it is recorded, against the stored message, in the recording's transaction
    // (src/store/messages.ts `applyMessageUpdate`), so a store fault is waited out there instead of losing the
    // update; only the sender's role in the group is the engine's to tell (group-revokes.ts).
    await queue.record(await markAdminDeletion(event, msg, { ...deps, logger: context.logger }));
    return true;
  };
  /** Records one message of a `messages.upsert` batch of `type`: an update as such, else as a message. */
  const recordUpserted = async (msg: WAMessage, type: BaileysEventMap['messages.upsert']['type']) => {
    // A stub of a message that could not be decrypted: its content may come from the sender's resend and from the
    // phone's placeholder resend, both live (`notify`), so whichever comes second is looked up as a copy.
    if (msg.messageStubType === proto.WebMessageInfo.StubType.CIPHERTEXT && msg.key.id)
      undecrypted.set(msg.key.id, true);
    const remote = msg.key.remoteJid;
    if (!remote || isJidBroadcast(remote) || isJidNewsletter(remote)) return;
    if (await recordUpdate(msg)) return;
    let message: Awaited<ReturnType<typeof toEngineMessage>>;
    try {
      message = await toEngineMessage(msg, ctx, now());
    } catch (error) {
      context.logger.error(
        { err: error, event: 'message', id: msg.key.id },
        'mapping a platform message failed',
      );
      return;
    }
    if (!message) return;
    // Offline delivery (`append`), or a message whose first delivery could not be decrypted, may come again.
    const again = type === 'append' || undecrypted.get<boolean>(message.id) === true;
    await queue.record(again ? { type: 'message', message, mayRepeat: true } : { type: 'message', message });
    if (!message.source.isFromMe && !message.source.isGroup)
      deps.subscribePresence(sock, message.source.chat);
  };
  on('messages.upsert', async ({ messages, type }) => {
    for (const msg of messages) {
      // One message failing (a bug: every store fault is waited out where it is recorded) never keeps the batch's
      // later messages from being recorded (docs/decisions/0011-store-faults.md).
      try {
        await recordUpserted(msg, type);
      } catch (error) {
        context.logger.error(
          { err: error, event: 'messages.upsert', id: msg.key.id },
          'handling a platform message failed',
        );
      }
    }
  });
  on('messages.update', async (updates) => {
    for (const event of await receiptsFromUpdates(updates, ctx, now())) await queue.record(event);
  });
  on('message-receipt.update', async (updates) => {
    for (const event of await receiptsFromGroupUpdates(updates, ctx, now())) await queue.record(event);
  });
  on('messaging-history.set', async (data) => {
    await queue.record(await historyFromSet(data, ctx, now()));
    const contacts = await deps.contacts.merge(data.contacts, ctx);
    if (contacts.length > 0) await queue.record({ type: 'contacts', contacts });
  });
  const onContacts = async (inputs: BaileysEventMap['contacts.update']) => {
    const contacts = await deps.contacts.merge(inputs, ctx);
    if (contacts.length > 0) await queue.record({ type: 'contacts', contacts });
  };
  on('contacts.upsert', onContacts);
  on('contacts.update', onContacts);
  // Group metadata kept teaches the resolver the members' LID pairs (groups.ts keepGroup).
  on('groups.upsert', async (metas) => {
    for (const meta of metas) keepGroup(meta, deps.groups, deps.resolver);
  });
  on('groups.update', async (updates) => {
    for (const update of updates) {
      learnGroupPairs(update, deps.resolver);
      const existing = update.id ? deps.groups.get<GroupMetadata>(update.id) : undefined;
      if (existing && update.id) deps.groups.set(update.id, { ...existing, ...update });
    }
  });
  on('group-participants.update', async ({ id }) => {
    deps.groups.del(id);
    if (!isJidGroup(id)) return;
    try {
      keepGroup(await sock.groupMetadata(id), deps.groups, deps.resolver);
    } catch (error) {
      context.logger.debug({ err: error }, 'refreshing group metadata failed');
    }
  });
  on('labels.edit', async (label) => {
    const event = labelEventOf(label);
    if (event) await queue.record(event);
  });
  on('labels.association', async (update) => {
    const event = await chatLabelEventOf(update, deps.resolver);
    if (event) await queue.record(event);
  });
  on('call', async (calls) => {
    await deps.calls?.(sock, calls);
  });
  const onChatstate = (node: BinaryNode) =>
    queue.enqueue(async () => {
      const event = await presenceFromChatstate(node, ctx);
      if (event) await queue.record(event);
    }, 'chatstate');
  sock.ws.on('CB:chatstate', onChatstate);
  detachers.push(() => sock.ws.off('CB:chatstate', onChatstate));
  const onGroupNotification = (node: BinaryNode) =>
    queue.enqueue(async () => {
      const updates = await groupUpdatesFromNotification(node, ctx, now());
      if (updates[0]) deps.groups.del(updates[0].groupJid);
      // The platform hands a notification over again as it does a message (its acknowledgement lost): each change
      // carries the notification's id and its place in it, so a repeat makes no second event (message-copies.ts).
      const id = node.attrs.id;
      for (const [index, update] of updates.entries()) {
        const platformId = id && id.length <= MAX_NOTIFICATION_ID ? `${id}/${index}` : undefined;
        await queue.record(
          platformId === undefined ? { type: 'group', update } : { type: 'group', update, platformId },
        );
      }
    }, 'w:gp2');
  sock.ws.on(GROUP_NOTIFICATION, onGroupNotification);
  detachers.push(() => sock.ws.off(GROUP_NOTIFICATION, onGroupNotification));
  return () => {
    for (const detach of detachers) detach();
  };
}
