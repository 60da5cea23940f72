import type { Insertable, Kysely } from 'kysely';
import { type LidMapping, lidOfJid } from '../domain/lids.ts';
import { type Jid, userJid } from '../domain/messages.ts';
import { compiledListStatement } from './compiled.ts';
import type { Database, LidMappingsTable } from './schema.ts';

/**
 * The phone↔LID pairs of an instance (migration 0019, docs/decisions/0038-lid-mappings.md). `lid` and `phone` are
 * digits only; times epoch ms (docs/decisions/0027-times-as-epoch-ms.md).
 */

/** A stored pair with the epoch ms it was last seen. */
export interface StoredLidMapping extends LidMapping {
  updatedAt: number;
}

/** Most rows one upsert statement carries (4 parameters each: well under SQLite's and PostgreSQL's limits). */
const UPSERT_CHUNK = 500;

/**
 * Stores pairs of `instanceId` seen at `at` (epoch ms): a LID's row is created or its phone and time replaced (a
 * LID names one user; the latest sighting wins). Pairs repeated in `mappings` keep the last one. One statement per
 * 500 pairs (a history sync may carry thousands).
 * @throws the store's error (the caller's transaction then rolls back).
 */
export async function upsertLidMappings(
  db: Kysely<Database>,
  instanceId: string,
  mappings: readonly LidMapping[],
  at: number,
): Promise<void> {
  const byLid = new Map<string, string>();
  for (const { lid, phone } of mappings) byLid.set(lid, phone);
  if (byLid.size === 0) return;
  const rows = [...byLid].map(([lid, phone]) => ({ instance_id: instanceId, lid, phone, updated_at: at }));
  for (let start = 0; start < rows.length; start += UPSERT_CHUNK) {
    await UPSERT_LID_MAPPINGS.run(db, {}, rows.slice(start, start + UPSERT_CHUNK));
  }
}

/** LID ↔ phone pairs, a known LID's phone replaced (compiled per list length, src/store/compiled.ts). */
const UPSERT_LID_MAPPINGS = compiledListStatement<Record<never, never>, Insertable<LidMappingsTable>>(
  { instance_id: true, lid: true, phone: true, updated_at: true },
  (db, _arg, rows) =>
    db
      .insertInto('lid_mappings')
      .values(rows)
      .onConflict((oc) =>
        oc.columns(['instance_id', 'lid']).doUpdateSet((eb) => ({
          phone: eb.ref('excluded.phone'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      ),
);

/**
 * The phone numbers (digits) of the pairs `instanceId` keeps for `lids` (LID digits), by LID; a LID with none kept is
 * absent. One statement per {@link LOOKUP_CHUNK} LIDs (an `in` list read through the primary key).
 * @throws the store's error.
 */
export async function findLidPhones(
  db: Kysely<Database>,
  instanceId: string,
  lids: readonly string[],
): Promise<Map<string, string>> {
  const unique = [...new Set(lids)];
  const phones = new Map<string, string>();
  for (let start = 0; start < unique.length; start += LOOKUP_CHUNK) {
    const rows = await db
      .selectFrom('lid_mappings')
      .select(['lid', 'phone'])
      .where('instance_id', '=', instanceId)
      .where('lid', 'in', unique.slice(start, start + LOOKUP_CHUNK))
      .execute();
    for (const row of rows) phones.set(row.lid, row.phone);
  }
  return phones;
}

/** The pair of LID `lid` (digits) of `instanceId`, or undefined when none was stored. */
export async function findLidMappingByLid(
  db: Kysely<Database>,
  instanceId: string,
  lid: string,
): Promise<StoredLidMapping | undefined> {
  const row = await db
    .selectFrom('lid_mappings')
    .select(['lid', 'phone', 'updated_at'])
    .where('instance_id', '=', instanceId)
    .where('lid', '=', lid)
    .executeTakeFirst();
  return row && { lid: row.lid, phone: row.phone, updatedAt: Number(row.updated_at) };
}

/**
 * The pair of phone number `phone` (digits) of `instanceId`, or undefined when none was stored; when several LIDs
 * were seen for one number, the most recently seen.
 */
export async function findLidMappingByPhone(
  db: Kysely<Database>,
  instanceId: string,
  phone: string,
): Promise<StoredLidMapping | undefined> {
  const row = await db
    .selectFrom('lid_mappings')
    .select(['lid', 'phone', 'updated_at'])
    .where('instance_id', '=', instanceId)
    .where('phone', '=', phone)
    .orderBy('updated_at', 'desc')
    .orderBy('lid', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row && { lid: row.lid, phone: row.phone, updatedAt: Number(row.updated_at) };
}

/** Most LIDs one statement of {@link keptPhoneJids} names: well under both stores' parameter limits. */
const LOOKUP_CHUNK = 500;

/**
 * The kept phone JIDs of the LID JIDs among `jids` (docs/decisions/0038-lid-mappings.md: a LID and the phone JID of
 * its kept pair name one user and one chat): each `<digits>@lid` (a device part allowed) whose pair `instanceId`
 * stores maps to `<phone>@s.whatsapp.net`; other JIDs, and LIDs without a pair, are absent. No statement when no
 * JID is a LID; one per 500 LIDs otherwise.
 * @throws the store's error.
 */
export async function keptPhoneJids(
  db: Kysely<Database>,
  instanceId: string,
  jids: Iterable<Jid>,
): Promise<Map<Jid, Jid>> {
  const lidsOf = new Map<string, Jid[]>();
  for (const jid of jids) {
    const lid = lidOfJid(jid);
    if (lid === null) continue;
    const named = lidsOf.get(lid);
    if (named === undefined) lidsOf.set(lid, [jid]);
    else if (!named.includes(jid)) named.push(jid);
  }
  const kept = new Map<Jid, Jid>();
  for (const [lid, phone] of await findLidPhones(db, instanceId, [...lidsOf.keys()])) {
    for (const jid of lidsOf.get(lid) ?? []) kept.set(jid, userJid(phone));
  }
  return kept;
}
