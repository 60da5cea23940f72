import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { isLidAddress, lidOfJid } from '../domain/lids.ts';
import { GROUP_DOMAIN, type Jid, phoneOfJid, userJid } from '../domain/messages.ts';
import { contentOf } from '../domain/sends.ts';
import { decodeSendPayload } from '../sends/payload.ts';
import { type ChatSummary, listChats, listHistory } from '../store/chats.ts';
import type { Store } from '../store/database.ts';
import { findLidMappingByLid } from '../store/lid-mappings.ts';
import { findStoredMessage, type StoredMessage } from '../store/messages.ts';
import type { Database } from '../store/schema.ts';
import { findSendJob } from '../store/send-jobs.ts';

export type { ChatSummary } from '../store/chats.ts';
export type { StoredMessage } from '../store/messages.ts';

/** Default page size of the chat list and a chat's history; {@link MAX_PAGE} is the largest. */
export const DEFAULT_PAGE = 50;
/** Largest page size a caller may ask for. */
export const MAX_PAGE = 100;

/** A page of results and the opaque cursor of the next page (null when this page is the last). */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** Paging input: page size (1 to {@link MAX_PAGE}) and the cursor a previous page returned. */
export interface PageInput {
  limit?: number | undefined;
  cursor?: string | undefined;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const GROUP_JID = new RegExp(`^\\d+(?:-\\d+)?@${GROUP_DOMAIN.replace('.', '\\.')}$`);
const PHONE = /^[0-9]{8,15}$/;

/**
 * The chat JID named by a `{jid}` path parameter: a bare phone number (8 to 15 digits) or a user JID (a device
 * part is dropped) becomes `<phone>@s.whatsapp.net`; a group JID (`<digits>[-<digits>]@g.us`) and a LID JID
 * (`<digits>@lid`, the chat of a user whose number parley does not know, docs/decisions/0038-lid-mappings.md) are
 * kept.
 * @throws DomainError invalid naming `jid` and the accepted forms.
 */
export function chatJidFromParam(raw: string): Jid {
  const value = raw.trim();
  if (PHONE.test(value)) return userJid(value);
  if (GROUP_JID.test(value) || isLidAddress(value)) return value;
  const phone = phoneOfJid(value);
  if (phone !== null && PHONE.test(phone)) return userJid(phone);
  throw errors.badRequest(
    'jid must be a phone number (digits only, international format), a user JID (<phone>@s.whatsapp.net), a group JID (<id>@g.us) or a LID (<digits>@lid)',
  );
}

/**
 * The JID the messages of chat `chat` are stored under: for a `<lid>@lid` chat, the phone JID of the pair parley keeps
 * for the LID (messages to and from a known LID are stored under its phone number); any other chat, or a LID without
 * a known pair, as it is (docs/decisions/0038-lid-mappings.md).
 */
export async function storedChatOf(db: Kysely<Database>, instanceId: string, chat: Jid): Promise<Jid> {
  const lid = lidOfJid(chat);
  if (lid === null) return chat;
  const pair = await findLidMappingByLid(db, instanceId, lid);
  return pair === undefined ? chat : userJid(pair.phone);
}

/**
 * The chat a `{jid}` path parameter names (see {@link chatJidFromParam}), as parley stores it ({@link storedChatOf}).
 * @throws DomainError invalid naming `jid`, as {@link chatJidFromParam}.
 */
export async function storedChatJid(db: Kysely<Database>, instanceId: string, raw: string): Promise<Jid> {
  return storedChatOf(db, instanceId, chatJidFromParam(raw));
}

/** The opaque cursor of a position (`timestamp` epoch ms): base64url of `[RFC 3339 timestamp, key]`. */
export function encodeCursor(timestamp: number, key: string): string {
  return Buffer.from(JSON.stringify([new Date(timestamp).toISOString(), key])).toString('base64url');
}

/**
 * The position a cursor encodes, its timestamp as epoch ms.
 * @throws DomainError invalid `cursor is not valid: pass the nextCursor of a previous page` when it was not made
 *   by {@link encodeCursor}.
 */
export function decodeCursor(cursor: string): { timestamp: number; key: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = null;
  }
  if (
    Array.isArray(parsed) &&
    parsed.length === 2 &&
    typeof parsed[0] === 'string' &&
    RFC3339.test(parsed[0]) &&
    !Number.isNaN(Date.parse(parsed[0])) &&
    typeof parsed[1] === 'string' &&
    parsed[1] !== ''
  ) {
    return { timestamp: Date.parse(parsed[0]), key: parsed[1] };
  }
  throw errors.badRequest('cursor is not valid: pass the nextCursor of a previous page');
}

/** Page size from input, default {@link DEFAULT_PAGE}. @throws DomainError invalid outside 1..{@link MAX_PAGE}. */
function pageSize(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw errors.badRequest(`limit must be an integer from 1 to ${MAX_PAGE}`);
  }
  return limit;
}

/**
 * Chats and history (docs/decisions/0026-chats-edits-polls-and-calls.md), read from the message store
 * (docs/decisions/0017-messages-and-media.md) only: no platform call, so they answer for any instance state, logged
 * in or not, sandbox or live alike (both engines record through the same recorder). Pages run newest first with an
 * opaque cursor; a page is fetched with one extra row to know whether another page follows.
 */
export class ChatService {
  readonly #store: Store;

  constructor(deps: { store: Store }) {
    this.#store = deps.store;
  }

  /**
   * The instance's chats, most recent activity (latest stored message) first, each with its latest message and
   * unread count (see `unreadCounts` in src/store/chats.ts). The cursor is the (timestamp, JID) of the last chat
   * of the page, so a chat whose activity moves it before the cursor meanwhile is not repeated.
   * @throws DomainError not_found `instance not found`; invalid for a bad `limit` or `cursor`.
   */
  async list(instance: Instance, input: PageInput): Promise<Page<ChatSummary>> {
    const limit = pageSize(input.limit);
    const at = input.cursor === undefined ? undefined : decodeCursor(input.cursor);
    const rows = await listChats(
      this.#store.db,
      instance.id,
      limit + 1,
      at && { timestamp: at.timestamp, chat: at.key },
    );
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    return {
      items,
      nextCursor: rows.length > limit && last ? encodeCursor(last.last.timestamp, last.jid) : null,
    };
  }

  /**
   * Stored messages of chat `jid` (see {@link storedChatJid}), newest first (ties by id). An unknown chat is an
   * empty page, not an error: a chat exists once a message was exchanged in it.
   * @throws DomainError not_found `instance not found`; invalid for a bad `jid`, `limit` or `cursor`.
   */
  async history(instance: Instance, jid: string, input: PageInput): Promise<Page<StoredMessage>> {
    const chat = await storedChatJid(this.#store.db, instance.id, jid);
    const limit = pageSize(input.limit);
    const at = input.cursor === undefined ? undefined : decodeCursor(input.cursor);
    const rows = await listHistory(
      this.#store.db,
      instance.id,
      chat,
      limit + 1,
      at && { timestamp: at.timestamp, id: at.key },
    );
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    return {
      items,
      nextCursor: rows.length > limit && last ? encodeCursor(last.timestamp, last.id) : null,
    };
  }

  /**
   * One message with its status (docs/decisions/0009-sends-as-jobs.md): a stored message's delivery state
   * (`sent`, `delivered`, `read`, `played`), or a send not yet relayed: `pending` (queued, scheduled or being
   * relayed), `failed` (with the platform's reason in `error`) or `canceled`; or `sent` for a send that went out
   * without its message row (recording it failed after the relay). A send not relayed yet names its chat as every
   * other read does ({@link storedChatOf}): a send to `<lid>@lid` by the phone JID of the pair parley keeps for the
   * LID, by the LID while none is kept (docs/decisions/0038-lid-mappings.md).
   * @throws DomainError not_found `instance not found`, `message not found` when the instance has no such message.
   */
  async message(instance: Instance, id: string): Promise<MessageWithStatus> {
    const [found, job] = await Promise.all([
      findStoredMessage(this.#store.db, instance.id, id),
      findSendJob(this.#store.db, instance.id, id),
    ]);
    if (found) return { ...found, status: found.state };
    if (!job) throw errors.notFound('message not found');
    if (job.status === 'sent' && job.payload === '') {
      // Marked sent with its message row (which took the payload) after the row was read: read the row again.
      const recorded = await findStoredMessage(this.#store.db, instance.id, id);
      if (!recorded) throw errors.notFound('message not found');
      return { ...recorded, status: recorded.state };
    }
    const outgoing = decodeSendPayload(job.payload, job.id);
    // The job keeps the address it was given; a `<lid>@lid` one is named, as its message will be, by the phone JID of
    // the pair kept for the LID (docs/decisions/0038-lid-mappings.md).
    const chat = await storedChatOf(this.#store.db, instance.id, job.chat);
    return {
      id: job.id,
      source: {
        chat,
        sender: instance.jid ?? '',
        isFromMe: true,
        isGroup: job.chat.endsWith(`@${GROUP_DOMAIN}`),
      },
      pushName: instance.pushName ?? '',
      timestamp: job.sendAt ?? job.createdAt,
      content: {
        ...contentOf(outgoing.content, outgoing.quotedId, outgoing.mentions),
        ...(outgoing.forwardingScore ? { forwardingScore: outgoing.forwardingScore } : {}),
      },
      // A job ended `sent` with no message row: the message went out and recording it failed (the engine's
      // UnrecordedSendError, docs/decisions/0009-sends-as-jobs.md), so it shows sent, with the job's own details.
      status: job.status === 'sending' ? 'pending' : job.status,
      ...(job.lastError !== null && job.status === 'failed' ? { error: job.lastError } : {}),
      ...(job.sendAt === null ? {} : { sendAt: job.sendAt }),
    };
  }
}

/**
 * A message and its status: a stored one carries its delivery `state` (and `status` equal to it); a send not yet
 * relayed carries no `state`, its `status` (`pending`, `failed`, `canceled`), the `error` of a failed one, and the
 * `sendAt` (epoch ms) of a scheduled one; a send that went out unrecorded carries no `state` and `status` `sent`.
 */
export type MessageWithStatus = Omit<StoredMessage, 'state' | 'stateAt'> &
  Partial<Pick<StoredMessage, 'state' | 'stateAt'>> & {
    status: StoredMessage['state'] | 'pending' | 'failed' | 'canceled';
    error?: string;
    sendAt?: number;
  };
