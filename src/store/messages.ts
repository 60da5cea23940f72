import type { Kysely } from 'kysely';
import type {
  DeliveryState,
  EngineMessage,
  Jid,
  MessageContent,
  MessageKind,
  MessageUpdate,
} from '../domain/messages.ts';
import { compiledStatement } from './compiled.ts';
import type { Database, MessagesTable } from './schema.ts';
import { toIso, toMs } from './times.ts';

/** Delivery states in order (docs/decisions/0017-messages-and-media.md); a message only ever moves to a later one. */
export const DELIVERY_STATES: readonly DeliveryState[] = ['sent', 'delivered', 'read', 'played'];

const KINDS: readonly MessageKind[] = [
  'text',
  'image',
  'document',
  'audio',
  'video',
  'sticker',
  'location',
  'contact',
  'reaction',
  'poll',
  'other',
];

/** A stored message: the engine's view plus its delivery state and when that last changed (RFC 3339). */
export interface StoredMessage extends EngineMessage {
  state: DeliveryState;
  stateAt: string;
}

/** A user the instance exchanged messages with (docs/decisions/0004-sandbox.md contacts list). Times are RFC 3339. */
export interface ChatPeer {
  jid: Jid;
  /** Latest display name the user's messages carried; empty when none arrived yet. */
  pushName: string;
  firstAt: string;
  lastAt: string;
}

/** The states strictly before `state` (a receipt for `state` may move a message out of these). */
export function statesBefore(state: DeliveryState): DeliveryState[] {
  return DELIVERY_STATES.slice(0, DELIVERY_STATES.indexOf(state));
}

/** A `messages` row as a {@link StoredMessage} (content parsed, flags as booleans, state checked). */
export function toStoredMessage(row: MessagesTable): StoredMessage {
  const content = JSON.parse(row.content) as MessageContent;
  const state = DELIVERY_STATES.find((s) => s === row.state) ?? 'sent';
  return {
    id: row.id,
    source: { chat: row.chat, sender: row.sender, isFromMe: row.from_me === 1, isGroup: row.is_group === 1 },
    pushName: row.push_name,
    timestamp: Number(row.timestamp),
    content,
    state,
    stateAt: toIso(row.state_at),
  };
}

/**
 * Stores `message` of instance `instanceId` in state `state` (`at` RFC 3339 is the state's time). A message
 * already stored under the same id is kept as it is (the platform echoes sends, history repeats messages).
 * @throws RangeError when `at` or the message's timestamp is not a time.
 */
export async function insertMessage(
  db: Kysely<Database>,
  instanceId: string,
  message: EngineMessage,
  state: DeliveryState,
  at: string,
): Promise<void> {
  const kind = KINDS.includes(message.content.kind) ? message.content.kind : 'other';
  const atMs = toMs(at);
  const timestamp = Math.trunc(message.timestamp);
  if (!Number.isFinite(timestamp))
    throw new RangeError(`message ${message.id}: not a time: ${message.timestamp}`);
  await INSERT_MESSAGE.run(db, {
    instanceId,
    id: message.id,
    chat: message.source.chat,
    sender: message.source.sender,
    fromMe: message.source.isFromMe ? 1 : 0,
    isGroup: message.source.isGroup ? 1 : 0,
    type: kind,
    content: JSON.stringify(message.content),
    pushName: message.pushName,
    timestamp,
    state,
    at: atMs,
  });
}

/** {@link insertMessage}'s statement (hot path: every sent and received message; compiled once per store). */
const INSERT_MESSAGE = compiledStatement<{
  instanceId: string;
  id: string;
  chat: string;
  sender: string;
  fromMe: number;
  isGroup: number;
  type: string;
  content: string;
  pushName: string;
  timestamp: number;
  state: string;
  at: number;
}>((db, arg) =>
  db
    .insertInto('messages')
    .values({
      instance_id: arg('instanceId'),
      id: arg('id'),
      chat: arg('chat'),
      sender: arg('sender'),
      from_me: arg('fromMe'),
      is_group: arg('isGroup'),
      type: arg('type'),
      content: arg('content'),
      push_name: arg('pushName'),
      timestamp: arg('timestamp'),
      state: arg('state'),
      state_at: arg('at'),
      created_at: arg('at'),
    })
    .onConflict((oc) => oc.columns(['instance_id', 'id']).doNothing()),
);

/**
 * Moves messages `ids` of an instance to `state` when they are in an earlier state (never backwards,
 * docs/decisions/0017-messages-and-media.md); `chat` limits the change to one chat when given. Returns how many rows
 * moved.
 */
export async function advanceDeliveryState(
  db: Kysely<Database>,
  instanceId: string,
  ids: readonly string[],
  state: DeliveryState,
  at: string,
  options: { chat?: Jid; fromMe?: boolean } = {},
): Promise<number> {
  const before = statesBefore(state);
  if (ids.length === 0 || before.length === 0) return 0;
  let query = db
    .updateTable('messages')
    .set({ state, state_at: toMs(at) })
    .where('instance_id', '=', instanceId)
    .where('id', 'in', [...ids])
    .where('state', 'in', before);
  if (options.chat !== undefined) query = query.where('chat', '=', options.chat);
  if (options.fromMe !== undefined) query = query.where('from_me', '=', options.fromMe ? 1 : 0);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * Records that the instance exchanged a message with user `jid` at `at` (RFC 3339); a non-empty `pushName`
 * (the name the user's own message carried) replaces the stored one.
 */
export async function touchPeer(
  db: Kysely<Database>,
  instanceId: string,
  jid: Jid,
  pushName: string,
  at: string,
): Promise<void> {
  const atMs = toMs(at);
  await (pushName === '' ? TOUCH_PEER : TOUCH_PEER_NAMED).run(db, { instanceId, jid, at: atMs, pushName });
}

/**
 * {@link touchPeer}'s statement (hot path; compiled once per store): `named` replaces the stored name on conflict,
 * otherwise an empty name keeps it.
 */
function touchPeerStatement(named: boolean) {
  return compiledStatement<{ instanceId: string; jid: string; at: number; pushName: string }>((db, arg) =>
    db
      .insertInto('chat_peers')
      .values({
        instance_id: arg('instanceId'),
        jid: arg('jid'),
        push_name: arg('pushName'),
        first_at: arg('at'),
        last_at: arg('at'),
      })
      .onConflict((oc) =>
        oc
          .columns(['instance_id', 'jid'])
          .doUpdateSet(named ? { last_at: arg('at'), push_name: arg('pushName') } : { last_at: arg('at') }),
      ),
  );
}

const TOUCH_PEER = touchPeerStatement(false);
const TOUCH_PEER_NAMED = touchPeerStatement(true);

/** Message `id` of an instance, or undefined when it was never stored. */
export async function findStoredMessage(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
): Promise<StoredMessage | undefined> {
  const row = await db
    .selectFrom('messages')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row ? toStoredMessage(row) : undefined;
}

/** Messages of an instance in `chat`, oldest first, ties by id (at most `limit`, default 100). */
export async function listChatMessages(
  db: Kysely<Database>,
  instanceId: string,
  chat: Jid,
  limit = 100,
): Promise<StoredMessage[]> {
  const rows = await db
    .selectFrom('messages')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('chat', '=', chat)
    .orderBy('timestamp')
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(toStoredMessage);
}

/** Every user the instance exchanged messages with, ordered by JID (docs/decisions/0004-sandbox.md contacts list). */
export async function listChatPeers(db: Kysely<Database>, instanceId: string): Promise<ChatPeer[]> {
  const rows = await db
    .selectFrom('chat_peers')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .orderBy('jid')
    .execute();
  return rows.map((row) => ({
    jid: row.jid,
    pushName: row.push_name,
    firstAt: toIso(row.first_at),
    lastAt: toIso(row.last_at),
  }));
}

/**
 * Applies an edit or a deletion for everyone to stored message `update.messageId`
 * (docs/decisions/0026-chats-edits-polls-and-calls.md): an edit replaces the text and sets `editedAt`; a deletion
 * drops the text, caption, mentions and poll and sets `deletedAt`. The row keeps its id, chat and delivery state. A
 * message parley never stored is left alone (returns false).
 */
export async function applyMessageUpdate(
  db: Kysely<Database>,
  instanceId: string,
  update: MessageUpdate,
): Promise<boolean> {
  const row = await db
    .selectFrom('messages')
    .select('content')
    .where('instance_id', '=', instanceId)
    .where('id', '=', update.messageId)
    .executeTakeFirst();
  if (!row) return false;
  const content = JSON.parse(row.content) as MessageContent;
  let next: MessageContent;
  if (update.kind === 'edit') {
    next = { ...content, text: update.text ?? '', editedAt: update.timestamp };
  } else {
    const { text: _text, mentions: _mentions, poll: _poll, ...rest } = content;
    next = { ...rest, deletedAt: update.timestamp };
  }
  await db
    .updateTable('messages')
    .set({ content: JSON.stringify(next) })
    .where('instance_id', '=', instanceId)
    .where('id', '=', update.messageId)
    .execute();
  return true;
}
