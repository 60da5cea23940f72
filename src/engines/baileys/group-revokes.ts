import type { GroupMetadata, WAMessage } from 'baileys';
import { normalizeMessageContent, proto } from 'baileys';
import type { FastifyBaseLogger } from 'fastify';
import type { EngineEvent } from '../../domain/messages.ts';
import { extended } from '../../domain/objects.ts';
import type { BoundedCache } from './cache.ts';
import { isAdminOf } from './groups.ts';
import type { MappingContext } from './incoming.ts';

/**
 * Deletions for everyone in a group by a member other than the message's sender
 * (docs/decisions/0026-chats-edits-polls-and-calls.md): a phone takes one only from a group admin, and the platform
 * relays a REVOKE naming any message from any member. The live engine marks a deletion whose sender it finds an
 * admin of the group (`MessageUpdate.byAdmin`); the message store refuses one of another member's message without
 * the mark (src/domain/messages.ts `updateMayChange`). The group's metadata comes from the session's cache, else
 * fetched through its socket. A deletion whose sender's role cannot be read at all is marked `unverified`
 * (docs/decisions/0106-unverified-group-deletions.md): the store keeps the message and reports the deletion so.
 */

/** Tries of reading a group's metadata for a deletion before it is judged unverified (the first included). */
export const ADMIN_READ_ATTEMPTS = 4;

/** Wait before the second try of {@link ADMIN_READ_ATTEMPTS}, ms; doubles for each later one (0.5 + 1 + 2 s). */
export const ADMIN_READ_WAIT_MS = 500;

/** What {@link markAdminDeletion} needs from the session. */
export interface AdminCheckDeps {
  /** The session's group metadata cache (Baileys' `cachedGroupMetadata`). */
  groups: BoundedCache;
  /**
   * Group `jid`'s metadata fetched through the session's current socket and kept in the cache; undefined while no
   * socket is open. @throws the socket's error.
   */
  fetchGroup(jid: string): Promise<GroupMetadata | undefined>;
  mapping: MappingContext;
  logger: FastifyBaseLogger;
  /** Wait before the second read, ms (default {@link ADMIN_READ_WAIT_MS}); doubles for each later one. */
  waitMs?: number;
  /**
   * Aborted when the session stops (a close at shutdown or hand-over, a disconnect, a logout, a lost lock): the read
   * under way is left and no other is made, so a stop is not held by it. Absent: never.
   */
  stopping?: AbortSignal;
}

/** What {@link untilStopped} answers once the session stopped first. */
const STOPPED = Symbol('stopped');

/** `work`'s outcome, or {@link STOPPED} as soon as `stopping` aborts first (`work`'s later failure is dropped). */
function untilStopped<T>(work: Promise<T>, stopping: AbortSignal | undefined): Promise<T | typeof STOPPED> {
  if (stopping === undefined) return work;
  if (stopping.aborted) {
    work.catch(() => undefined);
    return Promise.resolve(STOPPED);
  }
  return new Promise<T | typeof STOPPED>((resolve, reject) => {
    const stop = () => resolve(STOPPED);
    stopping.addEventListener('abort', stop, { once: true });
    work.then(
      (value) => {
        stopping.removeEventListener('abort', stop);
        resolve(value);
      },
      (error: unknown) => {
        stopping.removeEventListener('abort', stop);
        reject(error);
      },
    );
  });
}

/**
 * True when platform message `msg` deletes, in a group, a message its key says someone else sent: a REVOKE whose key
 * is not `fromMe` from its sender's side and names another participant. A deletion of the sender's own message needs
 * no admin (a forged one, naming another member's message as its own, is refused by the message store: the senders
 * differ and no admin marked it).
 */
export function revokesAnothers(msg: WAMessage): boolean {
  const protocol = normalizeMessageContent(msg.message)?.protocolMessage;
  if (protocol?.type !== proto.Message.ProtocolMessage.Type.REVOKE || !protocol.key) return false;
  if (protocol.key.fromMe === true) return false;
  const named = userOf(protocol.key.participant);
  const own = [msg.key.participant, msg.key.participantAlt].map(userOf);
  return named === undefined || !own.includes(named);
}

/** The user part of a JID (`5511…:3@s.whatsapp.net` → `5511…`); undefined for none. */
function userOf(jid: string | null | undefined): string | undefined {
  return jid ? jid.split('@')[0]?.split(':')[0] : undefined;
}

/**
 * `event` with `byAdmin` set when it is a deletion in a group of another member's message ({@link revokesAnothers})
 * whose sender is an admin of the group: the cached metadata says so, else the metadata fetched afresh (a cached copy
 * may predate a promotion), tried {@link ADMIN_READ_ATTEMPTS} times while the platform does not answer, until the
 * session stops (`deps.stopping`: the read under way is left). A deletion whose sender's role could not be read at
 * all is marked `unverified` instead, logged (docs/decisions/0106-unverified-group-deletions.md): the message store
 * keeps the message and reports the deletion as unverified, so neither a forged deletion deletes another member's
 * message nor is an admin's lost to a platform fault or a stop; a cached copy that says "not an admin" is believed
 * then. Any other event comes back as it is. Never throws.
 */
export async function markAdminDeletion(
  event: EngineEvent,
  msg: WAMessage,
  deps: AdminCheckDeps,
): Promise<EngineEvent> {
  if (event.type !== 'messageUpdate' || event.update.kind !== 'delete' || !event.update.source.isGroup)
    return event;
  if (!revokesAnothers(msg)) return event;
  const group = event.update.source.chat;
  const me = deps.mapping.me();
  const deleter = {
    phoneJid: event.update.source.sender,
    lid: msg.key.participant ?? null,
    alt: msg.key.participantAlt ?? null,
    own: msg.key.fromMe ? [me.phoneJid, me.lid] : [],
  };
  const isAdmin = (meta: GroupMetadata) =>
    [deleter.phoneJid, deleter.lid, deleter.alt, ...deleter.own].some(
      (jid) => jid !== null && isAdminOf(meta, { phoneJid: jid, lid: null }),
    );
  const mark = extended(event, { update: extended(event.update, { byAdmin: true as const }) });
  const cached = deps.groups.get<GroupMetadata>(group);
  if (cached && isAdmin(cached)) return mark;
  const { stopping } = deps;
  let wait = deps.waitMs ?? ADMIN_READ_WAIT_MS;
  let failure: unknown;
  for (let attempt = 1; attempt <= ADMIN_READ_ATTEMPTS && !stopping?.aborted; attempt++) {
    try {
      const fresh = await untilStopped(deps.fetchGroup(group), stopping);
      if (fresh === STOPPED) break;
      if (fresh) return isAdmin(fresh) ? mark : event;
    } catch (error) {
      failure = error;
    }
    if (attempt < ADMIN_READ_ATTEMPTS) {
      await pause(wait, stopping);
      wait *= 2;
    }
  }
  if (cached) return event;
  deps.logger.warn(
    {
      err: failure,
      event: 'messageUpdate',
      id: msg.key.id,
      chat: group,
      stopped: stopping?.aborted === true,
    },
    'whether the sender of a deletion in a group is an admin could not be read; the message is kept, the deletion ' +
      'reported as unverified',
  );
  return extended(event, { update: extended(event.update, { unverified: true as const }) });
}

/** Sleeps `ms`, ending early when `stopping` aborts. */
function pause(ms: number, stopping: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (stopping?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      stopping?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stopping?.addEventListener('abort', done, { once: true });
  });
}
