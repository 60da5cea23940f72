import type { Kysely } from 'kysely';
import type { CallSettings } from '../domain/calls.ts';
import { instanceRowError } from './faults.ts';
import type { Database } from './schema.ts';
import { toMs } from './times.ts';

/** The call handling of an instance (migration 0011); the default (calls ring, no message) when never set. */
export async function readCallSettings(db: Kysely<Database>, instanceId: string): Promise<CallSettings> {
  const row = await db
    .selectFrom('call_settings')
    .select(['reject', 'message'])
    .where('instance_id', '=', instanceId)
    .executeTakeFirst();
  return { reject: row?.reject === 1, message: row?.message ?? null };
}

/**
 * Stores the call handling of an instance (replacing the previous one); `at` is RFC 3339.
 * @throws RangeError when `at` is not a time; DomainError not_found `instance not found` when the instance was
 *   deleted meanwhile.
 */
export async function writeCallSettings(
  db: Kysely<Database>,
  instanceId: string,
  settings: CallSettings,
  at: string,
): Promise<void> {
  const values = { reject: settings.reject ? 1 : 0, message: settings.message, updated_at: toMs(at) };
  await db
    .insertInto('call_settings')
    .values({ instance_id: instanceId, ...values })
    .onConflict((oc) => oc.column('instance_id').doUpdateSet(values))
    .execute()
    .catch((error: unknown) => {
      throw instanceRowError(error);
    });
}
