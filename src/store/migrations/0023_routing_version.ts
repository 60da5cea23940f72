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

/** Numbers are drawn below this bound (2^52): a sum over thousands of endpoints stays within a 64-bit integer. */
const BOUND = 4503599627370496;

/** PostgreSQL's `BEFORE` row triggers: each draws into `column` on an insert, and on an update leaving it as it was. */
const PG_TRIGGERS = [
  {
    trigger: 'instances_routing_version',
    fn: 'parley_instances_routing_version',
    events: 'update',
    table: 'instances',
    column: 'routing_version',
  },
  {
    trigger: 'webhook_endpoints_routing_stamp',
    fn: 'parley_endpoints_routing_stamp',
    events: 'insert or update',
    table: 'webhook_endpoints',
    column: 'routing_stamp',
  },
] as const;

/**
 * SQLite's `AFTER` row triggers: each draws into `column` of the row written, on every insert or on an update
 * leaving it as it was.
 */
const SQLITE_TRIGGERS = [
  { trigger: 'instances_routing_version', event: 'update', table: 'instances', column: 'routing_version' },
  {
    trigger: 'webhook_endpoints_insert_routing_stamp',
    event: 'insert',
    table: 'webhook_endpoints',
    column: 'routing_stamp',
  },
  {
    trigger: 'webhook_endpoints_update_routing_stamp',
    event: 'update',
    table: 'webhook_endpoints',
    column: 'routing_stamp',
  },
] as const;

/** Adds the columns and the triggers that draw them (see above). */
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
    for (const { trigger, fn, events, table, column } of PG_TRIGGERS) {
      await sql
        .raw(`
          create function ${fn}() returns trigger language plpgsql as $$
          begin
            if tg_op = 'INSERT' or new.${column} = old.${column} then
              new.${column} := floor(random() * ${BOUND})::bigint;
            end if;
            return new;
          end
          $$`)
        .execute(db);
      await sql
        .raw(`create trigger ${trigger} before ${events} on ${table} for each row execute function ${fn}()`)
        .execute(db);
    }
    return;
  }
  for (const { trigger, event, table, column } of SQLITE_TRIGGERS) {
    // An update's own write changes the column, so the trigger stops there.
    const when = event === 'update' ? `when new.${column} = old.${column}` : '';
    await sql
      .raw(`
        create trigger ${trigger} after ${event} on ${table} for each row ${when}
        begin
          update ${table} set ${column} = random() & ${BOUND - 1} where id = new.id;
        end`)
      .execute(db);
  }
}

/** Drops the triggers, their functions (PostgreSQL) and the columns. */
export async function down(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    for (const { trigger, fn, table } of PG_TRIGGERS) {
      await sql.raw(`drop trigger ${trigger} on ${table}`).execute(db);
      await sql.raw(`drop function ${fn}()`).execute(db);
    }
  } else {
    for (const { trigger } of SQLITE_TRIGGERS) await sql.raw(`drop trigger ${trigger}`).execute(db);
  }
  await db.schema.alterTable('webhook_endpoints').dropColumn('routing_stamp').execute();
  await db.schema.alterTable('instances').dropColumn('routing_version').execute();
}
