import { type Kysely, type RawBuilder, sql } from 'kysely';
import { LID_DOMAIN, lidOfJid } from '../domain/lids.ts';
import { GROUP_DOMAIN, STATUS_BROADCAST, USER_DOMAIN, userJid } from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import type { PacingSettings, SendJobStatus, SendPause } from '../domain/sends.ts';
import { instanceRowError } from './faults.ts';
import { findLidMappingByLid } from './lid-mappings.ts';
import type { Database } from './schema.ts';

/**
 * Send pacing's store (migration 0013; docs/decisions/0013-pacing.md): an instance's pace and restriction pause, and
 * the counts the new-chats-per-day pace reads from the send jobs and messages. Times are epoch ms.
 */

/**
 * `sent` and `new_chat = 1` written into the statements' text, not bound, so SQLite and PostgreSQL use the
 * `send_jobs_new_chats` index, which holds only the sent chat-opening jobs (migration 0021,
 * docs/decisions/0060-live-send-job-index.md).
 */
const SENT = sql.lit<SendJobStatus>('sent');
const NEW_CHAT = sql.lit<number>(1);

/**
 * The phone JID (`<phone>@s.whatsapp.net`) of the pair the instance keeps for the `<lid>@lid` chat of the
 * `send_jobs` row named `table` in the statement it is part of, or null (any other chat, or no pair kept): a
 * correlated subquery reading `lid_mappings` by its primary key, as migration 0033 does.
 */
function keptPhoneJidOfJobChat(table: string): RawBuilder<string | null> {
  const chat = sql.ref<string>(`${table}.chat`);
  return sql<string | null>`(
  select l.phone || ${sql.lit(`@${USER_DOMAIN}`)} from lid_mappings l
  where l.instance_id = ${sql.ref(`${table}.instance_id`)} and ${chat} like ${sql.lit(`%@${LID_DOMAIN}`)}
    and l.lid = substr(${chat}, 1, length(${chat}) - ${sql.lit(LID_DOMAIN.length + 1)})
)`;
}

/**
 * The user the chat of the `send_jobs` row named `table` addresses, as an SQL expression of the statement it is part
 * of: for a `<lid>@lid` chat whose pair the instance keeps, that pair's phone JID (`<phone>@s.whatsapp.net`), where
 * the chat's messages are stored (docs/decisions/0038-lid-mappings.md); otherwise the chat as sent to
 * (`send_jobs.chat`: a phone JID, a group, or a LID with no pair kept, which parley cannot tell from another user).
 * The new-chats-per-day pace counts and releases slots by it, so a user written to by number and by LID takes one
 * slot (docs/decisions/0013-pacing.md). Only a LID chat reads `lid_mappings` (by its primary key).
 */
export function jobChatUser(table: string): RawBuilder<string> {
  const chat = sql.ref<string>(`${table}.chat`);
  const lid = sql.lit(`%@${LID_DOMAIN}`);
  return sql<string>`(
  case when ${chat} like ${lid} then coalesce(${keptPhoneJidOfJobChat(table)}, ${chat}) else ${chat} end
)`;
}

/**
 * How many users the relays of the instance's account opened a chat with since `since` (epoch ms): the
 * new-chats-per-day count, or `atMost` when it counts that many or more (a whole number ≥ 0: the cap, all its checks
 * ask). A user counts once whichever address their relays named them by ({@link jobChatUser}: by number, or by a LID
 * whose pair is kept now), so two relays each counted as opening a chat, one by number and one by LID before the pair
 * was learned, count one chat (docs/decisions/0013-pacing.md). The relays of an account that logged out since are not
 * counted ({@link retireAccountRelays}). One statement through `send_jobs_new_chats`, one look-up of a pair by its key
 * per LID relay read. With `atMost` the distinct users are read until `atMost` are found and no further: a window
 * holding more relays than the cap (a cap lowered, relays counted before it was set) is not read whole at every
 * chat-opening send. @throws the store's error.
 */
export async function countNewChatsSince(
  db: Kysely<Database>,
  instanceId: string,
  since: number,
  atMost?: number,
): Promise<number> {
  const window = db
    .selectFrom('send_jobs')
    .where('instance_id', '=', instanceId)
    .where('status', '=', SENT)
    .where('new_chat', '=', NEW_CHAT)
    .where('sent_at', '>=', since)
    .where('logged_out_at', 'is', null);
  if (atMost === undefined) {
    const row = await window
      .select(sql<number>`count(distinct ${jobChatUser('send_jobs')})`.as('n'))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }
  if (!Number.isSafeInteger(atMost) || atMost < 0)
    throw new RangeError(`atMost must be a whole number ≥ 0, got ${atMost}`);
  if (atMost === 0) return 0;
  const users = window.select(jobChatUser('send_jobs').as('chat_user')).distinct().limit(atMost);
  const row = await db
    .selectFrom(users.as('u'))
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * Flags as opening a chat (`new_chat = 1`) the instance's jobs sent since `since` (epoch ms) that opened one but were
 * relayed while no new-chats pace was set, so nobody asked (docs/decisions/0013-pacing.md: a cap set later counts
 * them); the relays of an account that logged out since are left (the cap is the account linked now's,
 * {@link retireAccountRelays}). A job opened its chat when it went to a one-to-one chat (not a group, not a status)
 * with no stored message before it: no message of another sent job of the instance relayed earlier (by `sent_at`,
 * then `seq`), and no other message (received, sent from the phone, a send whose job was pruned) with an earlier
 * `timestamp`. A job sent to `<lid>@lid` reads the messages of the phone JID of the pair kept for the LID too
 * (docs/decisions/0038-lid-mappings.md: its chat is stored there once the pair is known). One statement: it reads the
 * instance's stored jobs (no index holds the unflagged sent ones by time) and, for each one-to-one job sent since
 * `since`, its chat's messages up to the first before it (`messages_chat_order`); run when a cap is set, never per
 * send. @returns how many jobs it flagged.
 */
export async function markNewChatsSince(
  db: Kysely<Database>,
  instanceId: string,
  since: number,
): Promise<number> {
  const result = await db
    .updateTable('send_jobs')
    .set({ new_chat: NEW_CHAT })
    .where('instance_id', '=', instanceId)
    .where('status', '=', SENT)
    .where('new_chat', '=', sql.lit<number>(0))
    .where('sent_at', '>=', since)
    .where('logged_out_at', 'is', null)
    .where('chat', 'not like', `%@${GROUP_DOMAIN}`)
    .where('chat', '<>', STATUS_BROADCAST)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('messages as m')
            .leftJoin('send_jobs as o', (join) =>
              join.onRef('o.instance_id', '=', 'm.instance_id').onRef('o.id', '=', 'm.id'),
            )
            .select(sql.lit<number>(1).as('one'))
            .whereRef('m.instance_id', '=', 'send_jobs.instance_id')
            // The job's chat, and for a `<lid>@lid` job the phone JID of the pair kept for it, where the chat's
            // messages are stored once the pair is known (docs/decisions/0038-lid-mappings.md).
            .where((eb) => eb('m.chat', 'in', [eb.ref('send_jobs.chat'), keptPhoneJidOfJobChat('send_jobs')]))
            .whereRef('m.id', '<>', 'send_jobs.id')
            // A sent job's own message is ordered by its relay (the same clock, ties by acceptance), any other by
            // the message's time.
            .where((eb) =>
              eb
                .case()
                .when('o.sent_at', 'is', null)
                .then(eb('m.timestamp', '<', eb.ref('send_jobs.sent_at')))
                .else(
                  eb.or([
                    eb('o.sent_at', '<', eb.ref('send_jobs.sent_at')),
                    eb.and([
                      eb('o.sent_at', '=', eb.ref('send_jobs.sent_at')),
                      eb('o.seq', '<', eb.ref('send_jobs.seq')),
                    ]),
                  ]),
                )
                .end(),
            ),
        ),
      ),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * When the 24 h window next counts one user fewer, as the `sent_at` (epoch ms) whose leaving frees it: the earliest,
 * over the users counted since `since` ({@link countNewChatsSince}), of each user's latest chat-opening relay since
 * then. A user counted once for two relays (by number and by LID) stays counted until the later one leaves the
 * window (docs/decisions/0013-pacing.md). Undefined when none is counted (an account that logged out since is not).
 */
export async function oldestNewChatSince(
  db: Kysely<Database>,
  instanceId: string,
  since: number,
): Promise<number | undefined> {
  const lastPerUser = db
    .selectFrom('send_jobs')
    .select((eb) => eb.fn.max('sent_at').as('last'))
    .where('instance_id', '=', instanceId)
    .where('status', '=', SENT)
    .where('new_chat', '=', NEW_CHAT)
    .where('sent_at', '>=', since)
    .where('logged_out_at', 'is', null)
    .groupBy(jobChatUser('send_jobs'));
  const row = await db
    .selectFrom(lastPerUser.as('u'))
    .select((eb) => eb.fn.min('u.last').as('oldest'))
    .executeTakeFirst();
  return row?.oldest === null || row?.oldest === undefined ? undefined : Number(row.oldest);
}

/** An instance's stored pace and pause (pacing off and no pause when it never set one). */
export interface StoredPacing {
  pacing: PacingSettings;
  pause: SendPause | null;
  /**
   * The platform's reach-out timelock (migration 0027): until when (epoch ms) queued sends that open a chat wait,
   * and why; null when none was stored or the last one was ended.
   */
  newChatLock: SendPause | null;
}

/** Reads the instance's pace and pause. */
export async function readPacing(db: Kysely<Database>, instanceId: string): Promise<StoredPacing> {
  const row = await db
    .selectFrom('send_pacing')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .executeTakeFirst();
  if (!row)
    return {
      pacing: { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null },
      pause: null,
      newChatLock: null,
    };
  return {
    pacing: {
      minIntervalMs: row.min_interval_ms,
      jitterMs: row.jitter_ms,
      newChatsPerDay: row.new_chats_per_day,
    },
    pause:
      row.paused_reason !== null && row.paused_until !== null
        ? { reason: row.paused_reason, until: Number(row.paused_until) }
        : null,
    newChatLock:
      row.new_chats_lock_reason !== null && row.new_chats_locked_until !== null
        ? { reason: row.new_chats_lock_reason, until: Number(row.new_chats_locked_until) }
        : null,
  };
}

/**
 * Stores the instance's pace (the pause is kept).
 * @throws DomainError not_found `instance not found` when the instance was deleted meanwhile.
 */
export async function writePacing(
  db: Kysely<Database>,
  instanceId: string,
  pacing: PacingSettings,
  now: number,
): Promise<void> {
  const values = {
    min_interval_ms: pacing.minIntervalMs,
    jitter_ms: pacing.jitterMs,
    new_chats_per_day: pacing.newChatsPerDay,
    updated_at: now,
  };
  await db
    .insertInto('send_pacing')
    .values({ instance_id: instanceId, ...values, paused_reason: null, paused_until: null })
    .onConflict((oc) => oc.column('instance_id').doUpdateSet(values))
    .execute()
    .catch((error: unknown) => {
      throw instanceRowError(error);
    });
}

/** The columns of one restriction of an instance: its reason and its end (epoch ms). */
type RestrictionColumns =
  | { paused_reason: string | null; paused_until: number | null }
  | { new_chats_lock_reason: string | null; new_chats_locked_until: number | null };

/**
 * Writes one restriction's columns of the instance's `send_pacing` row (inserting the row, pace off, when it has
 * none), unless they already hold those values. @returns true when the row changed.
 * @throws DomainError not_found `instance not found` when the instance was deleted meanwhile.
 */
async function writeRestriction(
  db: Kysely<Database>,
  instanceId: string,
  columns: RestrictionColumns,
  now: number,
): Promise<boolean> {
  const values = extended(columns, { updated_at: now });
  const row = await db
    .insertInto('send_pacing')
    .values({ instance_id: instanceId, min_interval_ms: 0, jitter_ms: 0, new_chats_per_day: null, ...values })
    .onConflict((oc) =>
      oc
        .column('instance_id')
        .doUpdateSet(values)
        .where((eb) =>
          eb.or(
            Object.entries(columns).map(([column, value]) =>
              eb(sql.ref(`send_pacing.${column}`), 'is distinct from', value as string | number | null),
            ),
          ),
        ),
    )
    .returning('instance_id')
    .executeTakeFirst()
    .catch((error: unknown) => {
      throw instanceRowError(error);
    });
  return row !== undefined;
}

/**
 * Sets (a pause) or clears (null) the instance's restriction pause.
 * @returns true when the stored pause changed (a write that finds the same pause, or none to clear, changes nothing:
 *   its caller reports no new `SessionStatus`, docs/decisions/0076-status-with-its-write.md).
 * @throws DomainError not_found `instance not found` when the instance was deleted meanwhile.
 */
export function writePause(
  db: Kysely<Database>,
  instanceId: string,
  pause: SendPause | null,
  now: number,
): Promise<boolean> {
  const columns = { paused_reason: pause?.reason ?? null, paused_until: pause?.until ?? null };
  return writeRestriction(db, instanceId, columns, now);
}

/**
 * Stores the platform's reach-out timelock of the instance (docs/decisions/0013-pacing.md): queued sends that open a
 * chat wait until `lock.until` (epoch ms).
 * @returns true when the stored timelock changed (a write again that finds the same one changes nothing: its caller
 *   reports no new `SessionStatus`, docs/decisions/0076-status-with-its-write.md).
 * @throws DomainError not_found `instance not found` when the instance was deleted meanwhile.
 */
export function writeNewChatLock(
  db: Kysely<Database>,
  instanceId: string,
  lock: SendPause,
  now: number,
): Promise<boolean> {
  const columns = { new_chats_lock_reason: lock.reason, new_chats_locked_until: lock.until };
  return writeRestriction(db, instanceId, columns, now);
}

/**
 * Clears the instance's reach-out timelock when it ended by `now` (epoch ms); one still in force (stored meanwhile)
 * stays. @returns true when a timelock was cleared (its caller reports the instance `resumed`).
 */
export async function endNewChatLock(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
): Promise<boolean> {
  const result = await db
    .updateTable('send_pacing')
    .set({ new_chats_locked_until: null, new_chats_lock_reason: null, updated_at: now })
    .where('instance_id', '=', instanceId)
    .where('new_chats_locked_until', '<=', now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * What a logout does to the state of the account that logged out (docs/decisions/0013-pacing.md), in the logout's
 * transaction `db`, at `now` (epoch ms): the platform's restriction pause and reach-out timelock are cleared, both
 * restrictions of that account's number, not of the instance; the pace the user set (`min_interval_ms`,
 * `jitter_ms`, `new_chats_per_day`) is kept. No `SessionStatus` `resumed` is recorded for them: nothing resumes, the
 * logout's `logged_out` ends them. @returns true when a restriction was cleared.
 * @throws the store's error (the logout's transaction rolls back whole).
 */
export async function endAccountRestrictions(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
): Promise<boolean> {
  const result = await db
    .updateTable('send_pacing')
    .set({
      paused_reason: null,
      paused_until: null,
      new_chats_locked_until: null,
      new_chats_lock_reason: null,
      updated_at: now,
    })
    .where('instance_id', '=', instanceId)
    .where((eb) =>
      eb.or([
        eb('paused_reason', 'is not', null),
        eb('paused_until', 'is not', null),
        eb('new_chats_locked_until', 'is not', null),
        eb('new_chats_lock_reason', 'is not', null),
      ]),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Marks with `logged_out_at = now` (epoch ms) the instance's jobs sent since `since` (epoch ms) that carry no mark
 * yet, in the logout's transaction `db`: the relays of the account that logged out, which the new-chats count
 * ({@link countNewChatsSince}, {@link oldestNewChatSince}) and a cap set later ({@link markNewChatsSince}) leave from
 * then on, so the chats that account opened never count against the next one (docs/decisions/0013-pacing.md). Only
 * the relays a window may still count need it (the caller passes the logout's time less a day and a margin); a job
 * being relayed at the logout is marked by the logout's cancel (src/store/send-jobs.ts `cancelSendJobsOnLogout`), so
 * it is left out too when its relay ends it `sent`. Reads the instance's stored jobs, as {@link markNewChatsSince}
 * does (no index holds the sent ones by time). @returns how many jobs it marked.
 * @throws the store's error (the logout's transaction rolls back whole).
 */
export async function retireAccountRelays(
  db: Kysely<Database>,
  instanceId: string,
  since: number,
  now: number,
): Promise<number> {
  const result = await db
    .updateTable('send_jobs')
    .set({ logged_out_at: now })
    .where('instance_id', '=', instanceId)
    .where('status', '=', SENT)
    .where('sent_at', '>=', since)
    .where('logged_out_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * True when the instance has any message in `chat` other than `exceptId` (stored sent or received messages). A
 * `<lid>@lid` chat is read under the phone JID of the pair the instance keeps for it too, where its messages are
 * stored once the pair is known (docs/decisions/0038-lid-mappings.md): a send by LID to a user already written to
 * by number is no new chat (docs/decisions/0013-pacing.md). One look-up more for a LID chat only.
 * @throws the store's error.
 */
export async function chatHasHistory(
  db: Kysely<Database>,
  instanceId: string,
  chat: string,
  exceptId: string,
): Promise<boolean> {
  const chats = [chat];
  const lid = lidOfJid(chat);
  if (lid !== null) {
    const pair = await findLidMappingByLid(db, instanceId, lid);
    if (pair !== undefined) chats.push(userJid(pair.phone));
  }
  const row = await db
    .selectFrom('messages')
    .select('id')
    .where('instance_id', '=', instanceId)
    .where('chat', 'in', chats)
    .where('id', '<>', exceptId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
