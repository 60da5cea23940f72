import {
  type ColumnMetadata,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type DatabaseMetadataOptions,
  type Dialect,
  type Kysely,
  type SchemaMetadata,
  sql,
  type TableMetadata,
} from 'kysely';

/** Kysely's own tables (the migrator's state and its lock), left out unless asked for. */
const MIGRATOR_TABLES = ['kysely_migration', 'kysely_migration_lock'];

/** One column of a table of the current schema, as the catalog query returns it. */
interface CatalogColumn {
  table: string;
  kind: string;
  schema: string;
  column: string;
  type: string;
  typeSchema: string;
  notNull: boolean;
  hasDefault: boolean;
  autoIncrementing: boolean;
  comment: string | null;
}

/**
 * `dialect` (PostgreSQL) with an introspector that reads the tables of the connection's current schema only
 * (`current_schema()`: the schema a store was opened in, through its `search_path`), the schema the store's
 * migrator keeps its state in (src/store/database.ts). Kysely's own PostgreSQL introspector lists every table and
 * column of every schema of the database, and its migrator reads that list twice per run only to learn whether its
 * two tables exist; in a database shared with other schemas (other services' tables, or the test stores of a
 * suite, hundreds of schemas) each migration and each readiness check (docs/decisions/0023-operations.md) then read
 * the whole catalog: 0.6 s per store migrated over an empty database, 1.5 s once 120 other schemas existed.
 * `getSchemas` is Kysely's own.
 */
export function currentSchemaDialect(dialect: Dialect): Dialect {
  return {
    createDriver: () => dialect.createDriver(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createAdapter: () => dialect.createAdapter(),
    // biome-ignore lint/suspicious/noExplicitAny: Kysely's own Dialect signature takes Kysely<any>
    createIntrospector: (db: Kysely<any>) => currentSchemaIntrospector(db, dialect.createIntrospector(db)),
  };
}

/**
 * An introspector whose tables are those of `current_schema()` (tables, views and partitioned tables, with their
 * columns in order), Kysely's migrator tables left out unless `withInternalKyselyTables`; `getSchemas` is
 * `inner`'s. Errors are the driver's.
 */
// biome-ignore lint/suspicious/noExplicitAny: the introspector reads the catalog, which no Database type describes
function currentSchemaIntrospector(db: Kysely<any>, inner: DatabaseIntrospector): DatabaseIntrospector {
  const getTables = async (
    options: DatabaseMetadataOptions = { withInternalKyselyTables: false },
  ): Promise<TableMetadata[]> => {
    const { rows } = await sql<CatalogColumn>`
      select c.relname as "table", c.relkind as "kind", ns.nspname as "schema", a.attname as "column",
             typ.typname as "type", tns.nspname as "typeSchema", a.attnotnull as "notNull",
             a.atthasdef as "hasDefault",
             (a.attidentity <> '' or pg_get_serial_sequence(format('%I.%I', ns.nspname, c.relname), a.attname) is not null)
               as "autoIncrementing",
             col_description(c.oid, a.attnum) as "comment"
        from pg_catalog.pg_class c
        join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
        join pg_catalog.pg_attribute a on a.attrelid = c.oid
        join pg_catalog.pg_type typ on typ.oid = a.atttypid
        join pg_catalog.pg_namespace tns on tns.oid = typ.typnamespace
       where ns.nspname = current_schema()
         and c.relkind in ('r', 'v', 'p')
         and a.attnum > 0
         and not a.attisdropped
       order by c.relname, a.attnum`.execute(db);
    const tables = new Map<string, TableMetadata & { columns: ColumnMetadata[] }>();
    for (const row of rows) {
      if (!options.withInternalKyselyTables && MIGRATOR_TABLES.includes(row.table)) continue;
      let table = tables.get(row.table);
      if (table === undefined) {
        table = { name: row.table, schema: row.schema, isView: row.kind === 'v', columns: [] };
        tables.set(row.table, table);
      }
      table.columns.push({
        name: row.column,
        dataType: row.type,
        dataTypeSchema: row.typeSchema,
        isNullable: !row.notNull,
        hasDefaultValue: row.hasDefault,
        isAutoIncrementing: row.autoIncrementing,
        ...(row.comment === null ? {} : { comment: row.comment }),
      });
    }
    return [...tables.values()];
  };
  return {
    getSchemas: (): Promise<SchemaMetadata[]> => inner.getSchemas(),
    getTables,
    getMetadata: async (options?: DatabaseMetadataOptions): Promise<DatabaseMetadata> => ({
      tables: await getTables(options),
    }),
  };
}
