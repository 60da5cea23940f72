import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * Several signed webhook endpoints per instance (docs/decisions/0035-webhook-endpoints.md).
 *
 * - `webhook_endpoints`: an instance's extra endpoints: URL, subscribed event types (JSON array text), description,
 *   the signing secret sealed with the SecretBox, `enabled` (0/1), and when and why a 410 Gone disabled it; times in
 *   epoch ms (docs/decisions/0027-times-as-epoch-ms.md).
 * - `webhook_deliveries.endpoint_id` and `webhook_attempts.endpoint_id`: the endpoint a delivery goes to, `''` for
 *   the instance's default webhook (so existing rows and queries keep their meaning). The deliveries' primary key
 *   becomes `(event_id, endpoint_id)`, and the claim's indexes are per lane (instance, endpoint).
 *
 * PostgreSQL changes the key in place. SQLite cannot change a primary key: `webhook_deliveries` is rebuilt (SQLite's
 * documented procedure, as in 0015) with the new column and key, its rows copied; no table references it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('disabled_at', 'bigint')
    .addColumn('disabled_reason', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_endpoints_instance')
    .on('webhook_endpoints')
    .columns(['instance_id', 'created_at'])
    .execute();

  await db.schema
    .alterTable('webhook_attempts')
    .addColumn('endpoint_id', 'varchar(36)', (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema.dropIndex('webhook_attempts_event').execute();
  await db.schema
    .createIndex('webhook_attempts_event')
    .on('webhook_attempts')
    .columns(['event_id', 'endpoint_id', 'number'])
    .execute();

  await db.schema.dropIndex('webhook_deliveries_instance').execute();
  await db.schema.dropIndex('webhook_deliveries_in_flight').execute();
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await db.schema
      .alterTable('webhook_deliveries')
      .addColumn('endpoint_id', 'varchar(36)', (c) => c.notNull().defaultTo(''))
      .execute();
    await sql`alter table webhook_deliveries drop constraint webhook_deliveries_pkey`.execute(db);
    await sql`alter table webhook_deliveries add primary key (event_id, endpoint_id)`.execute(db);
  } else {
    await db.schema.dropIndex('webhook_deliveries_due').execute();
    await createDeliveries(db, 'webhook_deliveries__rebuilt', true);
    await sql`insert into webhook_deliveries__rebuilt (${sql.raw(COLUMNS)}, endpoint_id) select ${sql.raw(COLUMNS)}, '' from webhook_deliveries`.execute(
      db,
    );
    await sql`drop table webhook_deliveries`.execute(db);
    await sql`alter table webhook_deliveries__rebuilt rename to webhook_deliveries`.execute(db);
    await db.schema
      .createIndex('webhook_deliveries_due')
      .on('webhook_deliveries')
      .columns(['status', 'run_at'])
      .execute();
  }
  await db.schema
    .createIndex('webhook_deliveries_instance')
    .on('webhook_deliveries')
    .columns(['instance_id', 'endpoint_id', 'status', 'sequence'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_in_flight')
    .on('webhook_deliveries')
    .columns(['instance_id', 'endpoint_id', 'locked_at'])
    .execute();
}

/**
 * Drops the endpoints and their deliveries and attempts, and gives the default webhook's tables their 0016 shape.
 * @throws the driver's error; nothing is changed then.
 */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`delete from webhook_deliveries where endpoint_id <> ''`.execute(db);
  await sql`delete from webhook_attempts where endpoint_id <> ''`.execute(db);
  await db.schema.dropIndex('webhook_deliveries_instance').execute();
  await db.schema.dropIndex('webhook_deliveries_in_flight').execute();
  await db.schema.dropIndex('webhook_attempts_event').execute();
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`alter table webhook_deliveries drop constraint webhook_deliveries_pkey`.execute(db);
    await db.schema.alterTable('webhook_deliveries').dropColumn('endpoint_id').execute();
    await sql`alter table webhook_deliveries add primary key (event_id)`.execute(db);
  } else {
    await db.schema.dropIndex('webhook_deliveries_due').execute();
    await createDeliveries(db, 'webhook_deliveries__rebuilt', false);
    await sql`insert into webhook_deliveries__rebuilt select ${sql.raw(COLUMNS)} from webhook_deliveries`.execute(
      db,
    );
    await sql`drop table webhook_deliveries`.execute(db);
    await sql`alter table webhook_deliveries__rebuilt rename to webhook_deliveries`.execute(db);
    await db.schema
      .createIndex('webhook_deliveries_due')
      .on('webhook_deliveries')
      .columns(['status', 'run_at'])
      .execute();
  }
  await db.schema.alterTable('webhook_attempts').dropColumn('endpoint_id').execute();
  await db.schema
    .createIndex('webhook_attempts_event')
    .on('webhook_attempts')
    .columns(['event_id', 'number'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_instance')
    .on('webhook_deliveries')
    .columns(['instance_id', 'status', 'sequence'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_in_flight')
    .on('webhook_deliveries')
    .columns(['instance_id', 'locked_at'])
    .execute();
  await db.schema.dropTable('webhook_endpoints').execute();
}

/** The columns of `webhook_deliveries` other than `endpoint_id`, in their 0016 order. */
const COLUMNS =
  'event_id, instance_id, sequence, status, attempts, max_attempts, run_at, locked_by, locked_at, last_error, last_status, delivered_at, created_at, updated_at';

/** SQLite: creates the deliveries table `name`, keyed by `(event_id, endpoint_id)` or (0016) by `event_id`. */
async function createDeliveries(db: Kysely<unknown>, name: string, withEndpoint: boolean): Promise<void> {
  let table = db.schema
    .createTable(name)
    .addColumn('event_id', 'varchar(36)', (c) =>
      withEndpoint
        ? c.notNull().references('webhook_events.id').onDelete('cascade')
        : c.primaryKey().references('webhook_events.id').onDelete('cascade'),
    )
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('sequence', 'bigint', (c) => c.notNull())
    .addColumn('status', 'varchar(12)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull())
    .addColumn('run_at', 'bigint', (c) => c.notNull())
    .addColumn('locked_by', 'varchar(100)')
    .addColumn('locked_at', 'bigint')
    .addColumn('last_error', 'text')
    .addColumn('last_status', 'integer')
    .addColumn('delivered_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull());
  if (withEndpoint) {
    table = table
      .addColumn('endpoint_id', 'varchar(36)', (c) => c.notNull().defaultTo(''))
      .addPrimaryKeyConstraint('webhook_deliveries_pkey', ['event_id', 'endpoint_id']);
  }
  await table.execute();
}
