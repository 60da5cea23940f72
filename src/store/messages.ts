import { type Insertable, type Kysely, type OnConflictBuilder, sql } from 'kysely';
import {
  type DeliveryState,
  type EngineMessage,
  isUnverifiedDeletion,
  type Jid,
  type MessageContent,
  type MessageKind,
  type MessageSource,
  type MessageUpdate,
  type PollVote,
  updateMayChange,
} from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import type { ROWS_PER_INSERT } from './compiled.ts';
import { keptPhoneJids } from './lid-mappings.ts';
import { type RowSetWrites, rowSetInsert } from './row-sets.ts';
import type { ChatPeersTable, Database, MessagesTable } from './schema.ts';
import { toIso, toMs } from './times.ts';
import { runWriteGroup } from './write-groups.ts';

/** Moving what is stored under a LID once its pair is known (docs/decisions/0038-lid-mappings.md) lives there. */
export { MOVE_BATCH, moveLidChatMessages } from './lid-moves.ts';

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
  'interactive_reply',
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

/** A message to store and the state it is stored in. */
export interface NewMessage {
  message: EngineMessage;
  state: DeliveryState;
}

/**
 * Stores `messages` of instance `instanceId`, in their order, in one multi-row insert (on SQLite, at
 * most {@link ROWS_PER_INSERT} rows a statement; src/store/row-sets.ts) (`at` RFC 3339 is their state's time). A message already stored under the same id, or
 * repeated in `messages`, is kept as first stored (the platform echoes sends, history repeats messages).
 * @throws RangeError when `at` or a message's timestamp is not a time (nothing is written then).
 */
export async function insertMessages(
  db: Kysely<Database>,
  instanceId: string,
  messages: readonly NewMessage[],
  at: string,
): Promise<void> {
  await runWriteGroup(db, [insertMessagesWrites(instanceId, messages, at)]);
}

/** Most characters of a push name the store keeps (`messages.push_name`, `chat_peers.push_name`: varchar(200)). */
export const MAX_PUSH_NAME = 200;

/**
 * `pushName` as the store keeps it: its first {@link MAX_PUSH_NAME} UTF-16 units. The platform hands the name over
 * as the sender's client set it, and PostgreSQL refused a longer one (22001, a permanent error): the message, already
 * acknowledged, was lost (docs/decisions/0011-store-faults.md); SQLite, which does not bound it, now keeps the same.
 */
export function keptPushName(pushName: string): string {
  return pushName.length <= MAX_PUSH_NAME ? pushName : pushName.slice(0, MAX_PUSH_NAME);
}

/**
 * The statements {@link insertMessages} runs, not run (to write them with another table's rows,
 * src/store/write-groups.ts). Errors as {@link insertMessages}.
 */
export function insertMessagesWrites(
  instanceId: string,
  messages: readonly NewMessage[],
  at: string,
): RowSetWrites<Insertable<MessagesTable>> {
  const atMs = toMs(at);
  const rows = messages.map(({ message, state }) => {
    const timestamp = Math.trunc(message.timestamp);
    if (!Number.isFinite(timestamp))
      throw new RangeError(`message ${message.id}: not a time: ${message.timestamp}`);
    return {
      instance_id: instanceId,
      id: message.id,
      chat: message.source.chat,
      sender: message.source.sender,
      from_me: message.source.isFromMe ? 1 : 0,
      is_group: message.source.isGroup ? 1 : 0,
      type: KINDS.includes(message.content.kind) ? message.content.kind : 'other',
      content: JSON.stringify(message.content),
      push_name: keptPushName(message.pushName),
      timestamp,
      state,
      state_at: atMs,
      created_at: atMs,
    };
  });
  return { statement: INSERT_MESSAGES, rows };
}

/** Message rows, a message already stored under the same id left as it is (src/store/row-sets.ts). */
const INSERT_MESSAGES = rowSetInsert<'messages', Insertable<MessagesTable>>('messages', {
  fields: {
    instance_id: true,
    id: true,
    chat: true,
    sender: true,
    from_me: true,
    is_group: true,
    type: true,
    content: true,
    push_name: true,
    timestamp: true,
    state: true,
    state_at: true,
    created_at: true,
  },
  conflict: (oc) => oc.columns(['instance_id', 'id']).doNothing(),
});

/**
 * Which of `ids` are stored messages of instance `instanceId`, each with its chat JID (one statement, by the
 * messages' primary key); empty without a statement when `ids` is. What tells a copy of a message the platform
 * handed over again from a new one (src/events/message-copies.ts): message rows are never pruned, so the answer holds
 * however old the first copy is.
 * @throws the store's error.
 */
export async function storedMessageIds(
  db: Kysely<Database>,
  instanceId: string,
  ids: readonly string[],
): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('messages')
    .select(['id', 'chat'])
    .where('instance_id', '=', instanceId)
    .where('id', 'in', [...ids])
    .execute();
  return new Map(rows.map((row) => [row.id, row.chat]));
}

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

/** A user a message was exchanged with, and the display name it showed ('' when unknown). */
export interface PeerSighting {
  jid: Jid;
  pushName: string;
}

/**
 * Records that instance `instanceId` exchanged messages with each of `peers` at `at` (RFC 3339): a new peer gets
 * `first_at`; every peer gets `last_at` and, when a sighting carries one, its latest non-empty display name (an
 * empty name keeps the stored one). Sightings of one user are merged first (a statement may not change a row
 * twice); one statement on PostgreSQL, at most {@link ROWS_PER_INSERT} peers a statement on SQLite.
 * @throws RangeError when `at` is not a time.
 */
export async function touchPeers(
  db: Kysely<Database>,
  instanceId: string,
  peers: readonly PeerSighting[],
  at: string,
): Promise<void> {
  await runWriteGroup(db, [touchPeersWrites(instanceId, peers, at)]);
}

/**
 * The statements {@link touchPeers} runs, not run (to write them with another table's rows,
 * src/store/write-groups.ts). Errors as {@link touchPeers}.
 */
export function touchPeersWrites(
  instanceId: string,
  peers: readonly PeerSighting[],
  at: string,
): RowSetWrites<Insertable<ChatPeersTable>> {
  const atMs = toMs(at);
  const names = new Map<string, string>();
  for (const { jid, pushName } of peers) {
    if (pushName !== '' || !names.has(jid))
      names.set(jid, pushName === '' ? (names.get(jid) ?? '') : pushName);
  }
  const rows = [...names].map(([jid, pushName]) => ({
    instance_id: instanceId,
    jid,
    push_name: keptPushName(pushName),
    first_at: atMs,
    last_at: atMs,
  }));
  return { statement: TOUCH_PEERS, rows };
}

/** On a known peer: the new `last_at`, and the new name unless it is empty. */
const peerConflict = (oc: OnConflictBuilder<Database, 'chat_peers'>) =>
  oc.columns(['instance_id', 'jid']).doUpdateSet({
    last_at: (eb) => eb.ref('excluded.last_at'),
    push_name: sql<string>`case when excluded.push_name = '' then chat_peers.push_name else excluded.push_name end`,
  });

/**
 * Peer rows, a known peer updated by {@link peerConflict} (src/store/row-sets.ts); a statement changes a peer once,
 * so rows of the same instance and JID are never merged into one.
 */
const TOUCH_PEERS = rowSetInsert<'chat_peers', Insertable<ChatPeersTable>>('chat_peers', {
  fields: { instance_id: true, jid: true, push_name: true, first_at: true, last_at: true },
  conflict: peerConflict,
  keyOf: (row) => `${row.instance_id}\u0000${row.jid}`,
});

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
 * The JIDs of the `limit` users the instance exchanged messages with most recently (`chat_peers` by `last_at`,
 * newest first, ties by JID): the default audience of a status (docs/decisions/0044-status-stories.md).
 */
export async function listRecentPeerJids(
  db: Kysely<Database>,
  instanceId: string,
  limit: number,
): Promise<Jid[]> {
  const rows = await db
    .selectFrom('chat_peers')
    .select('jid')
    .where('instance_id', '=', instanceId)
    .orderBy('last_at', 'desc')
    .orderBy('jid')
    .limit(limit)
    .execute();
  return rows.map((row) => row.jid);
}

/**
 * What {@link applyMessageUpdate} did: changed the message, found none stored, refused the update, or kept the
 * message for a deletion reported as unverified ({@link isUnverifiedDeletion}).
 */
export type UpdateOutcome = 'changed' | 'not-stored' | 'refused' | 'unverified';

/**
 * Applies an edit or a deletion for everyone to stored message `update.messageId`
 * (docs/decisions/0026-chats-edits-polls-and-calls.md): an edit replaces the text and sets `editedAt`; a deletion
 * drops the text, caption, mentions and poll and sets `deletedAt`. The row keeps its id, chat and delivery state. A
 * message parley never stored is left alone (`not-stored`), and so is one the update may not change
 * ({@link updateMayChange}: `refused`, or `unverified` for a group deletion whose sender's role the engine could not
 * read, {@link isUnverifiedDeletion}, docs/decisions/0106-unverified-group-deletions.md), a LID and the phone JID of
 * its kept pair counting as one chat and one sender (docs/decisions/0038-lid-mappings.md: an engine that does not know
 * the pair names the LID while the message is stored under the phone JID, chat and sender, since the pair was
 * stored). A compare-and-set ({@link changeContent}): a new media reference stored meanwhile is kept.
 * @throws Error when the content kept changing under every attempt; the store's error.
 */
export async function applyMessageUpdate(
  db: Kysely<Database>,
  instanceId: string,
  update: MessageUpdate,
): Promise<UpdateOutcome> {
  const target = await findStoredMessage(db, instanceId, update.messageId);
  if (!target) return 'not-stored';
  const { source } = target;
  const kept = await keptPhoneJids(db, instanceId, [
    source.chat,
    source.sender,
    update.source.chat,
    update.source.sender,
  ]);
  const keptTarget = extended(target, { source: keptSource(source, kept) });
  const keptUpdate = extended(update, { source: keptSource(update.source, kept) });
  if (!updateMayChange(keptTarget, keptUpdate))
    return isUnverifiedDeletion(keptTarget, keptUpdate) ? 'unverified' : 'refused';
  const changed = await changeContent(db, instanceId, update.messageId, (content) => {
    if (update.kind === 'edit')
      return extended(content, { text: update.text ?? '', editedAt: update.timestamp });
    const { text: _text, mentions: _mentions, poll: _poll, ...rest } = content;
    return extended(rest, { deletedAt: update.timestamp });
  });
  return changed ? 'changed' : 'not-stored';
}

/**
 * Whether a vote on poll `vote.pollId` counts (docs/decisions/0026-chats-edits-polls-and-calls.md): it came in the
 * chat of the poll. The platform relays a `pollUpdateMessage` naming any poll, in any chat, and anyone holding the
 * poll's secret can encrypt a vote the live engine decrypts (a group member, who may have left since, voting from a
 * chat of their own); a phone looks the poll up in the chat the vote came in, so such a vote changes nothing there. A
 * LID and the phone JID of its kept pair are one chat (docs/decisions/0038-lid-mappings.md), and a LID without a
 * kept pair is taken for any chat (it cannot be compared). A poll parley never stored cannot be judged: its vote
 * counts, as before.
 * @throws the store's error.
 */
export async function voteMayCount(
  db: Kysely<Database>,
  instanceId: string,
  vote: PollVote,
): Promise<boolean> {
  const poll = await findStoredMessage(db, instanceId, vote.pollId);
  if (!poll) return true;
  if (poll.source.chat === vote.source.chat) return true;
  const kept = await keptPhoneJids(db, instanceId, [poll.source.chat, vote.source.chat]);
  const [pollChat, voteChat] = [poll.source.chat, vote.source.chat].map((jid) => kept.get(jid) ?? jid);
  // A LID no kept pair names cannot be compared with a phone JID: taken for the same chat, as a message's copies are
  // (src/events/message-copies.ts `sameChat`).
  return pollChat === voteChat || Boolean(pollChat?.endsWith('@lid') || voteChat?.endsWith('@lid'));
}

/** `source` with each JID `kept` maps (a LID with a kept pair) named by its phone JID. */
function keptSource(source: MessageSource, kept: ReadonlyMap<Jid, Jid>): MessageSource {
  return extended(source, {
    chat: kept.get(source.chat) ?? source.chat,
    sender: kept.get(source.sender) ?? source.sender,
  });
}

/** How many times {@link changeContent} reads the content again after another writer changed it in between. */
export const CONTENT_CHANGE_ATTEMPTS = 5;

/**
 * Rewrites the content of stored message `id` with `change` as a compare-and-set: the row is updated only where
 * its content is still the text that was read, read again and changed again when another writer (an edit, a
 * deletion, a re-upload) got in between, so no change is lost (at most {@link CONTENT_CHANGE_ATTEMPTS} reads).
 * Returns false when parley never stored the message.
 * @throws Error naming the message when its content changed under every attempt.
 */
async function changeContent(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  change: (content: MessageContent) => MessageContent,
): Promise<boolean> {
  for (let attempt = 0; attempt < CONTENT_CHANGE_ATTEMPTS; attempt++) {
    const row = await db
      .selectFrom('messages')
      .select('content')
      .where('instance_id', '=', instanceId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) return false;
    const next = change(JSON.parse(row.content) as MessageContent);
    const result = await db
      .updateTable('messages')
      .set({ content: JSON.stringify(next) })
      .where('instance_id', '=', instanceId)
      .where('id', '=', id)
      .where('content', '=', row.content)
      .executeTakeFirst();
    if (result.numUpdatedRows > 0n) return true;
  }
  throw new Error(
    `message ${id}: its content changed under each of ${CONTENT_CHANGE_ATTEMPTS} attempts to update it`,
  );
}

/**
 * Replaces the platform reference (`content.download`, the engine's text) of stored message `id`: the sender's
 * phone uploaded an expired media file again and the platform serves it elsewhere now
 * (docs/decisions/0046-media-re-upload.md). The rest of the content is kept as stored: an edit or a deletion
 * recorded meanwhile is kept (a compare-and-set, {@link changeContent}). Returns false when parley never stored
 * the message.
 * @throws Error when the content kept changing under every attempt.
 */
export async function setMessageDownload(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  download: string,
): Promise<boolean> {
  return changeContent(db, instanceId, id, (content) => extended(content, { download }));
}
