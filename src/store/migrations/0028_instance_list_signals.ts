import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * PostgreSQL: every insert, update and delete of an `instances` row signals the nodes listening on the store that the
 * instance list of the row's organization and environment changed (docs/decisions/0088-kept-instance-lists.md): an
 * `AFTER` row trigger calls `pg_notify` on the `parley_instances` channel with the payload of
 * docs/decisions/0078-store-signals.md, `<schema> - <org id>/<env>`: the table's schema (`%` and spaces written `%25`
 * and `%20`), no node (`-`, so the writing node hears it too) and the list's key. PostgreSQL sends it when the
 * transaction commits and drops it when it rolls back, and sends one of identical notifications of a transaction
 * (PostgreSQL's documentation, "NOTIFY"). A trigger rather than the writers: the service's statements, the command
 * line's and an operator's SQL are all heard. A `TRUNCATE`, which fires no row trigger, is signalled by a statement
 * trigger with the item `*`: every list. SQLite: nothing (its one process reads the list at each turn).
 */

/** The functions and triggers, in creation order: each function with the trigger that calls it. */
const UP = [
  `create function parley_instances_changed() returns trigger language plpgsql as $$
  declare
    changed record;
    head text := replace(replace(tg_table_schema, '%', '%25'), ' ', '%20') || ' - ';
  begin
    if tg_op = 'DELETE' then changed := old; else changed := new; end if;
    perform pg_notify('parley_instances', head || changed.org_id || '/' || changed.env);
    if tg_op = 'UPDATE' and (old.org_id <> new.org_id or old.env <> new.env) then
      perform pg_notify('parley_instances', head || old.org_id || '/' || old.env);
    end if;
    return null;
  end
  $$`,
  'create trigger instances_list_changed after insert or update or delete on instances for each row execute function parley_instances_changed()',
  `create function parley_instances_truncated() returns trigger language plpgsql as $$
  begin
    perform pg_notify('parley_instances', replace(replace(tg_table_schema, '%', '%25'), ' ', '%20') || ' - *');
    return null;
  end
  $$`,
  'create trigger instances_list_truncated after truncate on instances for each statement execute function parley_instances_truncated()',
];

/** What {@link down} runs: the triggers, then their functions. */
const DOWN = [
  'drop trigger instances_list_truncated on instances',
  'drop function parley_instances_truncated()',
  'drop trigger instances_list_changed on instances',
  'drop function parley_instances_changed()',
];

/** Adds the triggers and their functions (PostgreSQL). */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  for (const statement of UP) await sql.raw(statement).execute(db);
}

/** Drops the triggers and their functions (PostgreSQL). */
export async function down(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  for (const statement of DOWN) await sql.raw(statement).execute(db);
}
