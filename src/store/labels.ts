import type { Kysely } from 'kysely';
import type { ChatLabelChange, Label, LabelEdit } from '../domain/labels.ts';
import { type LidMapping, lidJid } from '../domain/lids.ts';
import { type Jid, userJid } from '../domain/messages.ts';
import type { Database } from './schema.ts';

/**
 * The labels parley has seen of an instance's account and the labels of its chats (migration 0020,
 * docs/decisions/0045-business-labels.md). Times epoch ms (docs/decisions/0027-times-as-epoch-ms.md). Lists are in
 * label id order, numerically (ids are decimal digits).
 */

/** Orders label ids numerically: shorter digit strings first, then by text. */
function byId(a: { id: string }, b: { id: string }): number {
  return a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function toLabel(row: {
  label_id: string;
  name: string;
  color: number;
  predefined_id: string | null;
}): Label {
  return { id: row.label_id, name: row.name, color: Number(row.color), predefinedId: row.predefined_id };
}

/**
 * Applies one label change of `instanceId` seen at `at` (epoch ms): a label is created or replaced; a deleted label
 * loses its row and its chat rows.
 * @throws the store's error (the caller's transaction then rolls back).
 */
export async function applyLabelEdit(
  db: Kysely<Database>,
  instanceId: string,
  edit: LabelEdit,
  at: number,
): Promise<void> {
  if (edit.deleted) {
    await db
      .deleteFrom('chat_labels')
      .where('instance_id', '=', instanceId)
      .where('label_id', '=', edit.id)
      .execute();
    await db
      .deleteFrom('labels')
      .where('instance_id', '=', instanceId)
      .where('label_id', '=', edit.id)
      .execute();
    return;
  }
  await db
    .insertInto('labels')
    .values({
      instance_id: instanceId,
      label_id: edit.id,
      name: edit.name,
      color: edit.color,
      predefined_id: edit.predefinedId,
      updated_at: at,
    })
    .onConflict((oc) =>
      oc.columns(['instance_id', 'label_id']).doUpdateSet((eb) => ({
        name: eb.ref('excluded.name'),
        color: eb.ref('excluded.color'),
        predefined_id: eb.ref('excluded.predefined_id'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    )
    .execute();
}

/**
 * Forgets every label and chat label of `instanceId` (its account was logged out: the next account linked may be
 * another one, docs/decisions/0045-business-labels.md).
 * @throws the store's error.
 */
export async function clearLabels(db: Kysely<Database>, instanceId: string): Promise<void> {
  await db.deleteFrom('chat_labels').where('instance_id', '=', instanceId).execute();
  await db.deleteFrom('labels').where('instance_id', '=', instanceId).execute();
}

/**
 * Applies one chat label change of `instanceId` seen at `at` (epoch ms): labelled adds the row (or refreshes its
 * time), unlabelled removes it.
 * @throws the store's error.
 */
export async function applyChatLabel(
  db: Kysely<Database>,
  instanceId: string,
  change: ChatLabelChange,
  at: number,
): Promise<void> {
  if (!change.labeled) {
    await db
      .deleteFrom('chat_labels')
      .where('instance_id', '=', instanceId)
      .where('chat', '=', change.chat)
      .where('label_id', '=', change.labelId)
      .execute();
    return;
  }
  await db
    .insertInto('chat_labels')
    .values({ instance_id: instanceId, chat: change.chat, label_id: change.labelId, updated_at: at })
    .onConflict((oc) =>
      oc
        .columns(['instance_id', 'chat', 'label_id'])
        .doUpdateSet((eb) => ({ updated_at: eb.ref('excluded.updated_at') })),
    )
    .execute();
}

/** Most LID chats (or rows) one statement of {@link moveLidChatLabels} names: well under both stores' limits. */
const MOVE_CHUNK = 500;

/**
 * Moves the chat labels of `instanceId` kept under the LID chat (`<lid>@lid`) of a pair of `mappings` to that pair's
 * phone JID, where parley keeps the chat once it knows the pair (src/app/chats.ts `storedChatOf`,
 * docs/decisions/0038-lid-mappings.md): left under the LID, they were listed and removed by no name of the chat. A
 * label already on the phone JID keeps its row; the LID's row goes. One look-up per 500 pairs; a row is written
 * only for a LID chat that has labels.
 * @throws the store's error (the caller's transaction then rolls back).
 */
export async function moveLidChatLabels(
  db: Kysely<Database>,
  instanceId: string,
  mappings: readonly LidMapping[],
): Promise<void> {
  const phoneOf = new Map<Jid, Jid>();
  for (const { lid, phone } of mappings) phoneOf.set(lidJid(lid), userJid(phone));
  const lids = [...phoneOf.keys()];
  for (let start = 0; start < lids.length; start += MOVE_CHUNK) {
    const rows = await db
      .selectFrom('chat_labels')
      .select(['chat', 'label_id', 'updated_at'])
      .where('instance_id', '=', instanceId)
      .where('chat', 'in', lids.slice(start, start + MOVE_CHUNK))
      .execute();
    if (rows.length === 0) continue;
    const moved = rows.flatMap((row) => {
      const chat = phoneOf.get(row.chat);
      return chat === undefined
        ? []
        : [{ instance_id: instanceId, chat, label_id: row.label_id, updated_at: row.updated_at }];
    });
    for (let at = 0; at < moved.length; at += MOVE_CHUNK) {
      await db
        .insertInto('chat_labels')
        .values(moved.slice(at, at + MOVE_CHUNK))
        .onConflict((oc) => oc.columns(['instance_id', 'chat', 'label_id']).doNothing())
        .execute();
    }
    await db
      .deleteFrom('chat_labels')
      .where('instance_id', '=', instanceId)
      .where('chat', 'in', [...new Set(rows.map((row) => row.chat))])
      .execute();
  }
}

/** Every label of `instanceId`, in id order. */
export async function listLabels(db: Kysely<Database>, instanceId: string): Promise<Label[]> {
  const rows = await db
    .selectFrom('labels')
    .select(['label_id', 'name', 'color', 'predefined_id'])
    .where('instance_id', '=', instanceId)
    .execute();
  return rows.map(toLabel).sort(byId);
}

/** Label `id` of `instanceId`, or undefined when parley never saw it (or saw it deleted). */
export async function findLabel(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
): Promise<Label | undefined> {
  const row = await db
    .selectFrom('labels')
    .select(['label_id', 'name', 'color', 'predefined_id'])
    .where('instance_id', '=', instanceId)
    .where('label_id', '=', id)
    .executeTakeFirst();
  return row && toLabel(row);
}

/**
 * The labels on chat `chat` of `instanceId`, in id order: only labels parley knows (a chat row naming a label never
 * seen is kept but not listed).
 */
export async function listChatLabels(db: Kysely<Database>, instanceId: string, chat: Jid): Promise<Label[]> {
  const rows = await db
    .selectFrom('chat_labels')
    .innerJoin('labels', (join) =>
      join
        .onRef('labels.instance_id', '=', 'chat_labels.instance_id')
        .onRef('labels.label_id', '=', 'chat_labels.label_id'),
    )
    .select(['labels.label_id', 'labels.name', 'labels.color', 'labels.predefined_id'])
    .where('chat_labels.instance_id', '=', instanceId)
    .where('chat_labels.chat', '=', chat)
    .execute();
  return rows.map(toLabel).sort(byId);
}
