import { type Kysely, PostgresAdapter, type RawBuilder, sql } from 'kysely';

/**
 * One time representation in the store (docs/decisions/0027-times-as-epoch-ms.md): every time column still held as
 * RFC 3339 text (`varchar(30)`, migrations 0001–0014) becomes epoch milliseconds (`bigint`), like the queue
 * columns already were. Values are kept exactly (millisecond precision; text without a zone is read as UTC) and
 * NULLs stay NULL; a value that is not a time fails the migration, which changes nothing.
 *
 * - PostgreSQL: one `ALTER TABLE … ALTER COLUMN … TYPE bigint USING …` per table, inside the migration's
 *   transaction; PostgreSQL rebuilds the indexes on the changed columns itself.
 * - SQLite cannot change a column's type: each table is rebuilt (SQLite's documented procedure for such changes)
 *   from its own stored `CREATE TABLE` text with only the time columns' type changed, so constraints, defaults,
 *   foreign keys and column order stay as they were; its rows are copied with the conversion and its indexes
 *   created again. Foreign keys are off during the rebuild (a dropped parent table would otherwise cascade-delete
 *   its children) and checked with `PRAGMA foreign_key_check` before the one transaction commits. The copy converts
 *   only text values, so a rebuild run twice (the migration applied but not yet recorded) changes nothing more.
 */

/** Every time column converted, by table, in an order where parents come before the tables that reference them. */
export const TIME_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  organizations: ['created_at'],
  instances: ['last_connected_at', 'created_at'],
  api_keys: ['expires_at', 'revoked_at', 'last_used_at', 'created_at'],
  engine_auth: ['updated_at'],
  instance_locks: ['acquired_at', 'expires_at'],
  webhook_state: ['disabled_at'],
  webhook_events: ['created_at'],
  webhook_deliveries: ['delivered_at', 'created_at', 'updated_at'],
  webhook_attempts: ['attempted_at', 'finished_at'],
  gateway_replay: ['expires_at'],
  messages: ['timestamp', 'state_at', 'created_at'],
  chat_peers: ['first_at', 'last_at'],
  nodes: ['started_at'],
  dashboard_users: ['created_at', 'last_sign_in_at'],
  dashboard_sessions: ['created_at'],
  call_settings: ['updated_at'],
  idempotency_keys: ['created_at'],
};

/**
 * Converts every column of {@link TIME_COLUMNS} from RFC 3339 text to epoch ms.
 * @throws when a stored value is not a time (the driver's error on PostgreSQL); nothing is changed then.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (isPostgres(db)) {
    await alterPostgres(
      db,
      'bigint',
      (column) => sql`round(extract(epoch from ${sql.ref(column)}::timestamptz) * 1000)::bigint`,
    );
    return;
  }
  await rebuildSqlite(db, { from: 'varchar(30)', to: 'bigint' }, (column) => {
    const ref = sql.ref(column);
    // julianday() keeps the time as whole milliseconds internally; rounding recovers them exactly.
    return sql`case when typeof(${ref}) = 'text' then cast(round((julianday(${ref}) - 2440587.5) * 86400000) as integer) else ${ref} end`;
  });
}

/**
 * Converts the columns back to RFC 3339 UTC text with milliseconds (`Date#toISOString` form).
 * @throws the driver's error when the store cannot be changed; nothing is changed then.
 */
export async function down(db: Kysely<unknown>): Promise<void> {
  if (isPostgres(db)) {
    await alterPostgres(
      db,
      'varchar(30)',
      (column) =>
        sql`to_char((timestamptz 'epoch' + ${sql.ref(column)} * interval '1 millisecond') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
    );
    return;
  }
  await rebuildSqlite(db, { from: 'bigint', to: 'varchar(30)' }, (column) => {
    const ref = sql.ref(column);
    return sql`case when typeof(${ref}) = 'integer' then strftime('%Y-%m-%dT%H:%M:%S', ${ref} / 1000, 'unixepoch') || printf('.%03dZ', ${ref} % 1000) else ${ref} end`;
  });
}

/** True on PostgreSQL (the migration is handed no dialect: its Kysely adapter tells). */
function isPostgres(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** PostgreSQL: changes the type of every time column, one statement per table, reading zone-less text as UTC. */
async function alterPostgres(
  db: Kysely<unknown>,
  type: 'bigint' | 'varchar(30)',
  using: (column: string) => RawBuilder<unknown>,
): Promise<void> {
  await sql`select set_config('TimeZone', 'UTC', true)`.execute(db);
  for (const [table, columns] of Object.entries(TIME_COLUMNS)) {
    const changes = columns.map(
      (column) => sql`alter column ${sql.ref(column)} type ${sql.raw(type)} using ${using(column)}`,
    );
    await sql`alter table ${sql.table(table)} ${sql.join(changes)}`.execute(db);
  }
}

/** One stored schema object of a table (`sqlite_master`). */
interface SchemaRow {
  type: string;
  name: string;
  sql: string | null;
}

/**
 * SQLite: rebuilds every table of {@link TIME_COLUMNS} with its time columns declared `types.to` instead of
 * `types.from`, copying each row through `convert`.
 * @throws when a table's stored definition does not declare a time column as expected, when a value is not a
 *   time (NOT NULL or the copy fails), or when the rebuilt tables break a foreign key; nothing is changed then.
 */
async function rebuildSqlite(
  db: Kysely<unknown>,
  types: { from: string; to: string },
  convert: (column: string) => RawBuilder<unknown>,
): Promise<void> {
  const pragma = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(db);
  const foreignKeys = pragma.rows[0]?.foreign_keys === 1;
  const rebuild = async (trx: Kysely<unknown>) => {
    for (const [table, timeColumns] of Object.entries(TIME_COLUMNS)) {
      await rebuildTable(trx, table, timeColumns, types, convert);
    }
    const broken = await sql<Record<string, unknown>>`pragma foreign_key_check`.execute(trx);
    if (broken.rows.length > 0) {
      throw new Error(`foreign keys broken by the rebuild: ${JSON.stringify(broken.rows.slice(0, 5))}`);
    }
  };
  // Run inside the migrator's transaction (src/store/database.ts `migrateToLatest`), foreign keys must already be
  // off: SQLite ignores the setting inside a transaction, and dropping a parent table would cascade.
  if (db.isTransaction) {
    if (foreignKeys) throw new Error('migration 0015 needs foreign keys off before its transaction begins');
    await rebuild(db);
    return;
  }
  // Outside a transaction (a Migrator of Kysely's own SQLite adapter) it turns them off and opens its own.
  await sql`pragma foreign_keys = off`.execute(db);
  try {
    await db.transaction().execute(rebuild);
  } finally {
    if (foreignKeys) await sql`pragma foreign_keys = on`.execute(db);
  }
}

async function rebuildTable(
  db: Kysely<unknown>,
  table: string,
  timeColumns: readonly string[],
  types: { from: string; to: string },
  convert: (column: string) => RawBuilder<unknown>,
): Promise<void> {
  const objects =
    await sql<SchemaRow>`select type, name, sql from sqlite_master where tbl_name = ${table}`.execute(db);
  const definition = objects.rows.find((row) => row.type === 'table')?.sql;
  if (!definition) throw new Error(`table ${table} not found`);
  const prefix = `CREATE TABLE "${table}" (`;
  if (!definition.startsWith(prefix)) throw new Error(`table ${table}: unexpected definition ${definition}`);
  const rebuilt = `${table}__rebuilt`;
  let columnsText = definition.slice(prefix.length);
  for (const column of timeColumns) {
    const declared = `"${column}" ${types.from}`;
    const count = columnsText.split(declared).length - 1;
    if (count === 1) columnsText = columnsText.replace(declared, `"${column}" ${types.to}`);
    else if (count > 1 || !columnsText.includes(`"${column}" ${types.to}`))
      throw new Error(`table ${table}: column ${column} is not declared ${types.from} (${definition})`);
  }
  await sql.raw(`CREATE TABLE "${rebuilt}" (${columnsText}`).execute(db);
  const info = await sql<{ name: string }>`select name from pragma_table_info(${table}) order by cid`.execute(
    db,
  );
  const names = info.rows.map((row) => row.name);
  const values = names.map((name) => (timeColumns.includes(name) ? convert(name) : sql.ref(name)));
  await sql`insert into ${sql.table(rebuilt)} (${sql.join(names.map((name) => sql.ref(name)))}) select ${sql.join(values)} from ${sql.table(table)}`.execute(
    db,
  );
  // A value the conversion could not read became NULL: refuse rather than lose it.
  for (const column of timeColumns) {
    const ref = sql.ref(column);
    const counts = await sql<{ before: number; after: number }>`select (select count(${ref}) from ${sql.table(
      table,
    )}) as before, (select count(${ref}) from ${sql.table(rebuilt)}) as after`.execute(db);
    const row = counts.rows[0];
    if (row && row.before !== row.after)
      throw new Error(`${table}.${column}: ${row.before - row.after} values are not times`);
  }
  await sql`drop table ${sql.table(table)}`.execute(db);
  await sql`alter table ${sql.table(rebuilt)} rename to ${sql.table(table)}`.execute(db);
  // Indexes went with the old table; the automatic ones (primary key, unique) came with the definition.
  for (const index of objects.rows) {
    if (index.type === 'index' && index.sql !== null) await sql.raw(index.sql).execute(db);
  }
}
