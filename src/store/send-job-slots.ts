import { type Kysely, sql } from 'kysely';
import type { SendJobStatus } from '../domain/sends.ts';
import { compiledStatement, compiledWithLimit } from './compiled.ts';
import type { Database } from './schema.ts';
import { jobChatUser } from './send-pacing.ts';

/**
 * The queued sends of an instance that wait for a new-chat slot (the new-chats-per-day cap,
 * docs/decisions/0013-pacing.md), out of the due range of `send_jobs_due` until a freed slot releases them. Times are
 * epoch ms.
 */

/**
 * What a send waiting for a new-chat slot adds to its `run_at` (2^50 ms, some 35,000 years): its place among the
 * waiting ones (`run_at − SLOT_WAIT`, then `seq`) stays in the column that orders the queue, and every real time,
 * a `sendAt` included, stays below it, so no claim, sweep, count of due jobs or first-pending read takes it for due.
 * Only {@link releaseSlotWaiters} takes it off. A constant of the store's rows: it never changes.
 */
export const SLOT_WAIT = 2 ** 50;

/** `pending` as a literal, for the `send_jobs_due` index (src/store/send-job-claims.ts says why). */
const PENDING = sql.lit<SendJobStatus>('pending');

/**
 * A send released by {@link releaseSlotWaiters}: its id, the chat it goes to (`send_jobs.chat`) and the user whose slot
 * it goes on (src/store/send-pacing.ts `jobChatUser`: the phone JID of the pair kept for a LID, else the chat).
 */
export interface ReleasedSlotWaiter {
  id: string;
  chat: string;
  user: string;
}

interface ReleaseArgs extends Record<string, unknown> {
  instanceId: string;
  now: number;
}

type ReleasedRow = { id: string; chat: string; user: string; run_at: number | string; seq: number | string };

/** Every waiting send of the instance, back to its place (no cap). */
const releaseAll = compiledStatement<ReleaseArgs, ReleasedRow>((db, arg) =>
  db
    .updateTable('send_jobs')
    .set({ run_at: sql<number>`run_at - ${SLOT_WAIT}`, updated_at: arg('now') })
    .where('instance_id', '=', arg('instanceId'))
    .where('status', '=', PENDING)
    .where('run_at', '>=', SLOT_WAIT)
    .returning(['id', 'chat', jobChatUser('send_jobs').as('user'), 'run_at', 'seq']),
);

/**
 * The waiting sends of the instance's first `limit` users in wait order, back to their places: the users
 * (`jobChatUser`: a LID with a kept pair is its phone JID's user) are those of the waiting sends no waiting send to the
 * same user comes before (the first of each user), in their order (`run_at`, then `seq`), and every waiting send to
 * one of them is released, by number and by LID alike. The waiting sends are read once through `send_jobs_due`, each
 * one's user worked out once (`waiting`, materialized: one look-up of a pair by its key per send by LID); they are
 * numbered within their user in wait order (`row_number()`) and the first `limit` firsts taken (`firsts`); the sends
 * of those users are then written by key. Linear in the waiting sends, and a sort of them. Before, the first of each
 * user was found by comparing every waiting send with every one before it, both users worked out again for each
 * pair: quadratic in a backlog held at the cap (docs/decisions/0013-pacing.md).
 */
const releaseFirstUsers = compiledWithLimit<ReleaseArgs, ReleasedRow>((db, arg, limit) =>
  db
    .with(
      (cte) => cte('waiting').materialized(),
      (qb) =>
        qb
          .selectFrom('send_jobs as w')
          .select(['w.id', 'w.run_at', 'w.seq', jobChatUser('w').as('chat_user')])
          .where('w.instance_id', '=', arg('instanceId'))
          .where('w.status', '=', PENDING)
          .where('w.run_at', '>=', SLOT_WAIT),
    )
    .with('firsts', (qb) =>
      qb
        .selectFrom((numbered) =>
          numbered
            .selectFrom('waiting')
            .select(['chat_user', 'run_at', 'seq'])
            .select(
              sql<number>`row_number() over (partition by ${sql.ref('chat_user')} order by ${sql.ref('run_at')}, ${sql.ref('seq')})`.as(
                'turn',
              ),
            )
            .as('n'),
        )
        .select('n.chat_user')
        .where('n.turn', '=', sql.lit(1))
        .orderBy('n.run_at')
        .orderBy('n.seq')
        .limit(limit),
    )
    .updateTable('send_jobs')
    .set({ run_at: sql<number>`run_at - ${SLOT_WAIT}`, updated_at: arg('now') })
    .where('instance_id', '=', arg('instanceId'))
    .where('status', '=', PENDING)
    .where('run_at', '>=', SLOT_WAIT)
    .where('id', 'in', (inner) =>
      inner
        .selectFrom('waiting')
        .select('waiting.id')
        .where('waiting.chat_user', 'in', (firsts) => firsts.selectFrom('firsts').select('firsts.chat_user')),
    )
    .returning(['id', 'chat', jobChatUser('send_jobs').as('user'), 'run_at', 'seq']),
);

/**
 * Releases the instance's sends waiting for a new-chat slot, by user: those of the first `limit` users they go to, in
 * the order the users first wait (`run_at`, then `seq`, of each user's first waiting send), all of them when `limit`
 * is undefined. A user is the chat sent to (`send_jobs.chat`), a LID whose pair the instance keeps counting as the
 * user of that pair's phone JID (src/store/send-pacing.ts `jobChatUser`), as the store reads the pairs at this
 * statement: a pair learned while sends wait joins them from the next release. Every waiting send to such a user is
 * released with it, by number and by LID: sends to one new chat open one chat between them, the first relayed opens
 * it and the others go to a known chat, so a user takes one slot (docs/decisions/0013-pacing.md). Each gets back the
 * `run_at` it waited with (its place, the time its slot was first expected), so it is due from then on in that place
 * and claimed in its turn, its claim checking the cap again; `now` (epoch ms) is its `updated_at`. One compiled
 * statement either way, reading the instance's waiting sends through `send_jobs_due` and, for those sent to a LID, its
 * pair by its key (with a limit: the waiting sends, each user's first among them by a sort, then the first `limit`
 * users' waiting sends): linear in the waiting sends, and a sort.
 * @returns the sends released, in their order (`run_at`, then `seq`), and whether more may still wait (`limit` users
 *   released).
 * @throws the store's error.
 */
export async function releaseSlotWaiters(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
  limit?: number,
): Promise<{ released: ReleasedSlotWaiter[]; more: boolean }> {
  if (limit !== undefined && limit <= 0) return { released: [], more: true };
  const { rows } =
    limit === undefined
      ? await releaseAll.run(db, { instanceId, now })
      : await releaseFirstUsers.run(db, { instanceId, now }, limit);
  const released = rows
    .sort((a, b) => Number(a.run_at) - Number(b.run_at) || Number(a.seq) - Number(b.seq))
    .map((row) => ({ id: row.id, chat: row.chat, user: row.user }));
  const more = limit !== undefined && new Set(released.map((send) => send.user)).size >= limit;
  return { released, more };
}
