import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * What tells a process that an instance's routing changed (docs/decisions/0065-routing-version.md):
 *
 * - `instances.routing_version`: a new random number, drawn by the store, each time the row is updated (an update
 *   that itself changes the column is left as it is);
 * - `webhook_endpoints.routing_stamp`: a new random number each time the endpoint row is inserted or updated.
 *
 * The advance of an instance's sequence answers the instance's version with the count and the sum of its endpoints'
 * stamps: any change to the row or to its set of endpoints changes one of the three. The numbers are random (52
 * bits, below 2^52, so a sum over thousands of endpoints stays within a 64-bit integer) rather than counted, so a
 * number seen inside a transaction that rolled back is never handed out again.
 *
 * Triggers draw them, so no writer can forget: the service's statements, the command line's, an operator's SQL. They
 * write only the row being changed, so they take no lock the statement did not already hold. SQLite: `AFTER` row
 * triggers updating the row (its `ALTER TABLE` cannot add a column with a drawn default; the `WHEN` clause leaves
 * the triggers' own updates alone; SQLite's documentation, "CREATE TRIGGER"). PostgreSQL: `BEFORE` row triggers
 * setting the value in the row being written (PostgreSQL's documentation, "Triggers on Data Changes"), with their
 * functions in the schema the tables live in; they name no table, so they run whatever the session's `search_path`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('instances')
    .addColumn('routing_version', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('webhook_endpoints')
    .addColumn('routing_stamp', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`
      create function parley_instances_routing_version() returns trigger language plpgsql as $$
      begin
        if new.routing_version = old.routing_version then
          new.routing_version := floor(random() * 4503599627370496)::bigint;
        end if;
        return new;
      end
      $$`.execute(db);
    await sql`
      create trigger instances_routing_version before update on instances
      for each row execute function parley_instances_routing_version()`.execute(db);
    await sql`
      create function parley_endpoints_routing_stamp() returns trigger language plpgsql as $$
      begin
        if tg_op = 'INSERT' or new.routing_stamp = old.routing_stamp then
          new.routing_stamp := floor(random() * 4503599627370496)::bigint;
        end if;
        return new;
      end
      $$`.execute(db);
    await sql`
      create trigger webhook_endpoints_routing_stamp before insert or update on webhook_endpoints
      for each row execute function parley_endpoints_routing_stamp()`.execute(db);
    return;
  }
  await sql`
    create trigger instances_routing_version after update on instances
    for each row when new.routing_version = old.routing_version
    begin
      update instances set routing_version = random() & 4503599627370495 where id = new.id;
    end`.execute(db);
  await sql`
    create trigger webhook_endpoints_insert_routing_stamp after insert on webhook_endpoints
    begin
      update webhook_endpoints set routing_stamp = random() & 4503599627370495 where id = new.id;
    end`.execute(db);
  await sql`
    create trigger webhook_endpoints_update_routing_stamp after update on webhook_endpoints
    for each row when new.routing_stamp = old.routing_stamp
    begin
      update webhook_endpoints set routing_stamp = random() & 4503599627370495 where id = new.id;
    end`.execute(db);
}

/** Drops the triggers, their functions (PostgreSQL) and the columns. */
export async function down(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`drop trigger webhook_endpoints_routing_stamp on webhook_endpoints`.execute(db);
    await sql`drop function parley_endpoints_routing_stamp()`.execute(db);
    await sql`drop trigger instances_routing_version on instances`.execute(db);
    await sql`drop function parley_instances_routing_version()`.execute(db);
  } else {
    for (const name of SQLITE_TRIGGERS) await sql`drop trigger ${sql.ref(name)}`.execute(db);
  }
  await db.schema.alterTable('webhook_endpoints').dropColumn('routing_stamp').execute();
  await db.schema.alterTable('instances').dropColumn('routing_version').execute();
}

/** The SQLite triggers {@link up} creates. */
export const SQLITE_TRIGGERS = [
  'instances_routing_version',
  'webhook_endpoints_insert_routing_stamp',
  'webhook_endpoints_update_routing_stamp',
] as const;
