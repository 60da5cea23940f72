import type pg from 'pg';

/**
 * How many server sessions other than `client`'s own match `where`, a condition on the columns of `pg_stat_activity`
 * (e.g. `wait_event_type = 'Lock'`). PostgreSQL keeps a transaction's first read of the activity view until the
 * transaction ends (manual, 28.2.2 Viewing Statistics): a session that holds a lock in a transaction and polls for the
 * sessions it blocks would see that first read for ever, so each read here clears the snapshot first.
 */
export async function activityCount(client: pg.Client, where: string): Promise<number> {
  await client.query('select pg_stat_clear_snapshot()');
  const { rows } = await client.query(
    `select count(*)::int as n from pg_stat_activity where pid <> pg_backend_pid() and (${where})`,
  );
  return rows[0].n as number;
}
