import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * The routing version of an instance (docs/decisions/0065-routing-version.md): `instances.routing_version`, a
 * counter the store itself raises in the transaction of every change to what routes the instance's events, so a
 * process may keep the routing it read and reread it only when the number moved.
 *
 * - Any update of an `instances` row raises it by one (an update that sets the column itself is left as it is).
 * - Any insert, update or delete of a `webhook_endpoints` row raises its instance's (both instances, should an update
 *   move an endpoint).
 *
 * Triggers do the raising, so no writer can forget it: the service's own statements, the command line's, an
 * operator's SQL. SQLite: `AFTER` triggers; the update trigger's `WHEN` leaves its own update alone (SQLite's
 * documentation, "CREATE TRIGGER"). PostgreSQL: a `BEFORE UPDATE` row trigger on `instances` sets the new value in
 * the row being written, and an `AFTER` row trigger on `webhook_endpoints` updates the instance in the endpoint's
 * own schema (`TG_TABLE_SCHEMA`, whatever the session's `search_path`; PostgreSQL's documentation, "Triggers on Data
 * Changes"), with functions in the schema the tables live in.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('instances')
    .addColumn('routing_version', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`
      create function parley_instances_routing_version() returns trigger language plpgsql as $$
      begin
        if new.routing_version = old.routing_version then
          new.routing_version := old.routing_version + 1;
        end if;
        return new;
      end
      $$`.execute(db);
    await sql`
      create trigger instances_routing_version before update on instances
      for each row execute function parley_instances_routing_version()`.execute(db);
    await sql`
      create function parley_endpoints_routing_version() returns trigger language plpgsql as $$
      begin
        if tg_op <> 'INSERT' then
          execute format('update %I.instances set routing_version = routing_version + 1 where id = $1',
            tg_table_schema) using old.instance_id;
        end if;
        if tg_op = 'INSERT' or (tg_op = 'UPDATE' and new.instance_id is distinct from old.instance_id) then
          execute format('update %I.instances set routing_version = routing_version + 1 where id = $1',
            tg_table_schema) using new.instance_id;
        end if;
        return null;
      end
      $$`.execute(db);
    await sql`
      create trigger webhook_endpoints_routing_version after insert or update or delete on webhook_endpoints
      for each row execute function parley_endpoints_routing_version()`.execute(db);
    return;
  }
  await sql`
    create trigger instances_routing_version after update on instances
    for each row when new.routing_version = old.routing_version
    begin
      update instances set routing_version = old.routing_version + 1 where id = new.id;
    end`.execute(db);
  await sql`
    create trigger webhook_endpoints_insert_routing_version after insert on webhook_endpoints
    begin
      update instances set routing_version = routing_version + 1 where id = new.instance_id;
    end`.execute(db);
  await sql`
    create trigger webhook_endpoints_update_routing_version after update on webhook_endpoints
    begin
      update instances set routing_version = routing_version + 1 where id in (old.instance_id, new.instance_id);
    end`.execute(db);
  await sql`
    create trigger webhook_endpoints_delete_routing_version after delete on webhook_endpoints
    begin
      update instances set routing_version = routing_version + 1 where id = old.instance_id;
    end`.execute(db);
}

/** Drops the triggers, their functions (PostgreSQL) and the column. */
export async function down(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`drop trigger webhook_endpoints_routing_version on webhook_endpoints`.execute(db);
    await sql`drop function parley_endpoints_routing_version()`.execute(db);
    await sql`drop trigger instances_routing_version on instances`.execute(db);
    await sql`drop function parley_instances_routing_version()`.execute(db);
  } else {
    for (const name of SQLITE_TRIGGERS) await sql`drop trigger ${sql.ref(name)}`.execute(db);
  }
  await db.schema.alterTable('instances').dropColumn('routing_version').execute();
}

/** The SQLite triggers {@link up} creates. */
export const SQLITE_TRIGGERS = [
  'instances_routing_version',
  'webhook_endpoints_insert_routing_version',
  'webhook_endpoints_update_routing_version',
  'webhook_endpoints_delete_routing_version',
] as const;
