import { CompiledQuery, type Kysely, sql } from 'kysely';
import { type DeliveryState, type Jid, type MessageSource, phoneOfJid } from '../domain/messages.ts';
import { isPostgres } from './compiled.ts';
import { advanceDeliveryState, DELIVERY_STATES, statesBefore } from './messages.ts';
import type { Database } from './schema.ts';
import { toMs } from './times.ts';

/**
 * Receipts held for sends not recorded yet (migration 0038, docs/decisions/0104-receipts-before-their-send.md).
 *
 * The live engine records a send's message only once the platform acknowledged its relay; a relay whose ack was lost
 * is relayed again under its id after the next login (docs/decisions/0009-sends-as-jobs.md). The recipient may read
 * the message meanwhile, and its receipt then names an id no message row holds. Such a receipt, when it names a send
 * job of the instance still `pending` or `sending` in its chat, is held here instead of being reported: when the
 * job's message is recorded, its receipts are applied and reported after it, in the same transaction
 * ({@link takeHeldReceipts}). Every write here runs in the event recorder's transaction of the instance, after the
 * instance's earlier events, so a hold and the job's `sent` mark never race.
 */

/** A receipt of the account's own messages from another user, as {@link advanceOrHoldReceipt} takes it. */
export interface PeerReceipt {
  /** The acknowledged message ids. */
  ids: readonly string[];
  state: Exclude<DeliveryState, 'sent'>;
  /** The receipt's source as the engine reported it: `chat`, `sender` (who acknowledged), flags. */
  source: MessageSource;
  /** When the user acknowledged, epoch ms. */
  timestamp: number;
  /** The chat whose stored messages it may move: the source's chat, or the phone JID parley keeps for its LID. */
  chat: Jid;
  /** When it is recorded, RFC 3339 (the rows' `state_at`). */
  at: string;
}

/** A held receipt given back by {@link takeHeldReceipts}: the receipt event it stands for, one message id. */
export interface HeldReceipt {
  type: 'receipt';
  state: Exclude<DeliveryState, 'sent'>;
  messageIds: string[];
  source: MessageSource;
  timestamp: number;
}

/**
 * Moves the account's messages `receipt.ids` of chat `receipt.chat` forward to `receipt.state` (never backwards, as
 * src/store/messages.ts `advanceDeliveryState`), and holds the receipt for each id that names a send job of the
 * instance still `pending` or `sending` to that chat (the job's chat is the receipt's chat, its kept phone JID, or a
 * LID parley keeps for that number): its message is not stored yet. A receipt already held for the same job, state
 * and user is held once. On PostgreSQL one statement does both; on SQLite the hold is a second statement, run only
 * when some id moved nothing.
 * @returns the ids held (their receipt is not to be reported now).
 * @throws the store's error (the recorder's transaction then rolls back).
 */
export async function advanceOrHoldReceipt(
  db: Kysely<Database>,
  instanceId: string,
  receipt: PeerReceipt,
): Promise<ReadonlySet<string>> {
  const before = statesBefore(receipt.state);
  const ids = [...new Set(receipt.ids)];
  if (ids.length === 0) return new Set();
  const chats = [...new Set([receipt.chat, receipt.source.chat])];
  const phone = phoneOfJid(receipt.chat);
  const held = {
    sender: receipt.source.sender,
    receipt: JSON.stringify({ source: receipt.source, timestamp: receipt.timestamp }),
    heldAt: toMs(receipt.at),
  };
  if (isPostgres(db)) {
    const { rows } = await db.executeQuery<{ held: string[] }>(
      CompiledQuery.raw(ADVANCE_OR_HOLD_POSTGRES, [
        instanceId,
        ids,
        before,
        receipt.state,
        toMs(receipt.at),
        receipt.chat,
        chats,
        phone,
        held.sender,
        held.receipt,
        held.heldAt,
      ]),
    );
    return new Set(rows[0]?.held ?? []);
  }
  const moved = await advanceDeliveryState(db, instanceId, ids, receipt.state, receipt.at, {
    chat: receipt.chat,
    fromMe: true,
  });
  if (moved >= ids.length) return new Set();
  const rows = await db
    .insertInto('held_receipts')
    .columns(['instance_id', 'message_id', 'state', 'sender', 'receipt', 'held_at'])
    .expression((eb) =>
      eb
        .selectFrom('send_jobs')
        .select([
          'send_jobs.instance_id',
          'send_jobs.id',
          sql.val(receipt.state).as('state'),
          sql.val(held.sender).as('sender'),
          sql.val(held.receipt).as('receipt'),
          sql.val(held.heldAt).as('held_at'),
        ])
        .where('send_jobs.instance_id', '=', instanceId)
        .where('send_jobs.id', 'in', ids)
        .where('send_jobs.status', 'in', ['pending', 'sending'])
        .where((w) =>
          w.or([
            w('send_jobs.chat', 'in', chats),
            ...(phone === null
              ? []
              : [
                  w(
                    'send_jobs.chat',
                    'in',
                    w
                      .selectFrom('lid_mappings')
                      .select(sql<string>`lid || '@lid'`.as('jid'))
                      .where('lid_mappings.instance_id', '=', instanceId)
                      .where('lid_mappings.phone', '=', phone),
                  ),
                ]),
          ]),
        ),
    )
    .onConflict((oc) =>
      oc
        .columns(['instance_id', 'message_id', 'state', 'sender'])
        .doUpdateSet({ held_at: sql`held_receipts.held_at` }),
    )
    .returning('message_id')
    .execute();
  return new Set(rows.map((row) => row.message_id));
}

/**
 * {@link advanceOrHoldReceipt} on PostgreSQL, one statement: the advance and the hold in two data-modifying `with`
 * clauses (they touch different tables), answering the ids held. A conflicting hold (the same job, state and user
 * held before) changes nothing but is answered too, so its copy is not reported either. Parameters: $1 the
 * instance, $2 the ids, $3 the states before the new one, $4 the new state, $5 the time (epoch ms), $6 the chat,
 * $7 the chats a job may name, $8 the chat's phone digits (null for a group), $9 the sender, $10 the receipt JSON,
 * $11 the hold's time (epoch ms).
 */
const ADVANCE_OR_HOLD_POSTGRES = `with advanced as (
  update "messages" set state = $4::varchar, state_at = $5::bigint
  where instance_id = $1::varchar and id = any ($2::varchar[]) and state = any ($3::varchar[])
    and chat = $6::varchar and from_me = 1
  returning id
), held as (
  insert into "held_receipts" (instance_id, message_id, state, sender, receipt, held_at)
  select j.instance_id, j.id, $4::varchar, $9::varchar, $10::text, $11::bigint from "send_jobs" j
  where j.instance_id = $1::varchar and j.id = any ($2::varchar[]) and j.status in ('pending', 'sending')
    and (j.chat = any ($7::varchar[]) or j.chat in (
      select l.lid || '@lid' from lid_mappings l where l.instance_id = $1::varchar and l.phone = $8::varchar))
  on conflict (instance_id, message_id, state, sender) do update set held_at = held_receipts.held_at
  returning message_id
)
select (select count(*) from advanced) as advanced, array(select message_id from held) as held`;

/**
 * Takes (deletes) the receipts held for the instance's sends `ids` and gives them back as receipt events, one per
 * held row, in the order of `ids`, then of state (delivered, read, played), then of their hold: to be applied and
 * reported after the send's `message` event, or when the job ends without one. Nothing (no statement) for no ids.
 * @throws the store's error (the recorder's transaction then rolls back).
 */
export async function takeHeldReceipts(
  db: Kysely<Database>,
  instanceId: string,
  ids: readonly string[],
): Promise<HeldReceipt[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .deleteFrom('held_receipts')
    .where('instance_id', '=', instanceId)
    .where('message_id', 'in', [...ids])
    .returning(['message_id', 'state', 'receipt', 'held_at'])
    .execute();
  const order = new Map(ids.map((id, index) => [id, index]));
  rows.sort(
    (a, b) =>
      (order.get(a.message_id) ?? 0) - (order.get(b.message_id) ?? 0) ||
      rank(a.state) - rank(b.state) ||
      Number(a.held_at) - Number(b.held_at),
  );
  return rows.flatMap((row) => {
    const state = receiptState(row.state);
    if (state === undefined) return [];
    const { source, timestamp } = JSON.parse(row.receipt) as { source: MessageSource; timestamp: number };
    return [{ type: 'receipt', state, messageIds: [row.message_id], source, timestamp }];
  });
}

/** The place of `state` among the delivery states (unknown ones last). */
function rank(state: string): number {
  const index = DELIVERY_STATES.indexOf(state as DeliveryState);
  return index === -1 ? DELIVERY_STATES.length : index;
}

/** `state` as a receipt's state, or undefined when it is none. */
function receiptState(state: string): Exclude<DeliveryState, 'sent'> | undefined {
  return state === 'delivered' || state === 'read' || state === 'played' ? state : undefined;
}
