import { type CompiledQuery, type InsertQueryBuilder, type InsertResult, type Kysely, sql } from 'kysely';
import { chunksOf, compiledListStatement, compiledStatement } from './compiled.ts';
import type { Database } from './schema.ts';

/**
 * Multi-row inserts whose statement text does not follow the number of rows on PostgreSQL
 * (docs/decisions/0083-row-set-inserts.md).
 *
 * On SQLite the rows go in `values` lists, compiled once per list length and at most `ROWS_PER_INSERT` rows a
 * statement (src/store/compiled.ts). On PostgreSQL they go as one JSON array in one parameter, expanded by the
 * server: `insert into t (c1, …) select c1, … from json_populate_recordset(null::t, $1::json) [on conflict …]`
 * (PostgreSQL documentation, "JSON Functions and Operators"). Its text is the same for one row or ten thousand, so
 * it is parsed and planned once per connection as a named statement (docs/decisions/0055-named-statements.md),
 * and the rows of several transactions' parts written in one group ({@link RowSetWrites}, src/store/write-groups.ts)
 * merge into one statement a table instead of one clause each.
 */

/** The insert of one table, ready for its rows' source: `values` or a `select`, see {@link rowSetInsert}. */
type InsertInto<T extends keyof Database & string> = InsertQueryBuilder<Database, T, InsertResult>;

/** What a row set's insert does with a row whose key is already stored (Kysely's `onConflict` callback). */
export type ConflictClause<T extends keyof Database & string> = Parameters<InsertInto<T>['onConflict']>[0];

/** A table's multi-row insert over rows `I`, made by {@link rowSetInsert}. */
export interface RowSetStatement<I extends object> {
  /** The table written. */
  readonly table: keyof Database & string;
  /**
   * The key of a row the insert may not meet twice in one statement (an `on conflict … do update` changes a row
   * once a statement); undefined when rows may repeat (a plain insert, `do nothing`).
   */
  keyOf?(row: I): string;
  /**
   * The statements writing `rows` (at least one) in `values` lists of at most `ROWS_PER_INSERT` rows, in order.
   * @throws RangeError when a row lacks a declared field (undefined).
   */
  listQueries(db: Kysely<Database>, rows: readonly I[]): CompiledQuery[];
  /**
   * The one PostgreSQL statement writing `rows` (at least one) from a JSON array: every field of every row must
   * be a string, a finite number or null (a `bigint` is refused by `JSON.stringify`). A string that is not
   * well-formed UTF-16 (a lone surrogate) is sent with U+FFFD in its place, as `pg` sends it as a parameter.
   * @throws RangeError when a row lacks a declared field; TypeError for a `bigint` field.
   */
  recordSetQuery(db: Kysely<Database>, rows: readonly I[]): CompiledQuery;
}

/** The writes of one table's rows, merged with the rows of the same statement in a write group. */
export interface RowSetWrites<I extends object = object> {
  readonly statement: RowSetStatement<I>;
  readonly rows: readonly I[];
}

/** Options of {@link rowSetInsert}. */
export interface RowSetOptions<T extends keyof Database & string, I extends object> {
  /** Every field of a row, each a column of `table` (the type checker refuses a missing or an extra one). */
  fields: { readonly [K in keyof I & string]-?: true };
  /** The conflict clause, when the table's key may already hold a row. */
  conflict?: ConflictClause<T>;
  /** See {@link RowSetStatement.keyOf}: required with a conflict clause that updates. */
  keyOf?: (row: I) => string;
}

/**
 * A multi-row insert into `table` of rows `I` (see the module's comment for its two forms).
 * @throws Error at first use on a store when the builder's SQL is not what the statement needs (a builder mistake).
 */
export function rowSetInsert<T extends keyof Database & string, I extends object>(
  table: T,
  options: RowSetOptions<T, I>,
): RowSetStatement<I> {
  const columns = Object.keys(options.fields) as (keyof Database[T] & string)[];
  const conflict = options.conflict;
  const withConflict = (insert: InsertInto<T>): InsertInto<T> =>
    conflict === undefined ? insert : insert.onConflict(conflict);
  const list = compiledListStatement<Record<never, never>, I>(options.fields, (db, _arg, rows) =>
    withConflict(db.insertInto(table).values(rows as never)),
  );
  const recordSet = compiledStatement<{ rows: string }>((db, arg) =>
    withConflict(
      db
        .insertInto(table)
        .columns(columns)
        .expression(
          sql`select ${sql.join(columns.map((column) => sql.ref(column)))} from json_populate_recordset(null::${sql.table(table)}, ${arg('rows')}::json)`,
        ),
    ),
  );
  /** @throws RangeError naming the first row and field that is undefined. */
  const checked = (rows: readonly I[]): readonly I[] => {
    for (const [index, row] of rows.entries()) {
      const fields: Partial<Record<string, unknown>> = row;
      for (const column of columns)
        if (fields[column] === undefined) throw new RangeError(`item ${index} has no ${column}`);
    }
    return rows;
  };
  const keyOf = options.keyOf;
  return {
    table,
    ...(keyOf === undefined ? {} : { keyOf }),
    listQueries: (db, rows) => chunksOf(rows).map((chunk) => list.query(db, {}, chunk)),
    recordSetQuery(db, rows) {
      if (rows.length === 0) throw new RangeError('a row set needs at least one row');
      return recordSet.query(db, { rows: jsonRows(checked(rows), columns) });
    },
  };
}

/**
 * `rows` as a JSON array of objects holding `columns` only. `JSON.stringify` writes a lone surrogate as a `\udXXX`
 * escape, which PostgreSQL's JSON parser refuses; those strings are sent well-formed instead (U+FFFD in place of the
 * lone surrogate, what `pg` sends for such a string as a text parameter). It writes the NUL character (U+0000) as
 * `\u0000`, which the parser refuses too (22P05: PostgreSQL's text cannot hold it); it is left out of those strings.
 * A platform event can carry one (a peer's client may put it in a push name), and refused, the event was lost
 * (docs/decisions/0075-no-nul-characters.md).
 */
function jsonRows(rows: readonly object[], columns: string[]): string {
  const text = JSON.stringify(rows, columns);
  // A lone surrogate's escape is `\ud800` to `\udfff`; a valid pair is escaped only when lone, so any `\ud` escape
  // (or a false alarm: an escaped backslash before `ud`) sends the rows through the slower, exact path; so does a
  // `\u0000` escape (or the same false alarm).
  if (!text.includes('\\ud') && !text.includes('\\u0000')) return text;
  return JSON.stringify(rows.map((row) => wellFormedRow(row, columns)));
}

function wellFormedRow(row: object, columns: readonly string[]): Record<string, unknown> {
  const fields: Partial<Record<string, unknown>> = row;
  const out: Record<string, unknown> = {};
  for (const column of columns) {
    const value = fields[column];
    out[column] =
      typeof value === 'string' ? value.replace(LONE_SURROGATE, '\ufffd').replaceAll('\u0000', '') : value;
  }
  return out;
}

/** A high surrogate not followed by a low one, or a low surrogate not preceded by a high one (UTF-16 code units). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
