import { CompiledQuery, type Kysely } from 'kysely';
import { isPostgres } from './compiled.ts';
import { runLast } from './last-statement.ts';
import { PLAN_EACH_RUN } from './pg-statements.ts';
import type { RowSetStatement, RowSetWrites } from './row-sets.ts';
import type { Database } from './schema.ts';

/**
 * Most bound parameters one grouped statement carries: half of what PostgreSQL's protocol allows in one statement
 * (65,535, a 16-bit count in the Bind message), so a group never comes near it.
 */
export const MAX_GROUP_PARAMETERS = 32_767;

/**
 * The writes of one table, nothing reading their results: its statements (several when its rows did not fit one,
 * `chunksOf` in src/store/compiled.ts), or its rows for a row-set insert (src/store/row-sets.ts), which a group
 * on PostgreSQL merges with the other rows of the same statement.
 */
export type TableWrites = readonly CompiledQuery[] | RowSetWrites;

/** Writes put off to the next group of their transaction ({@link deferWrites}), by transaction. */
const deferred = new WeakMap<Kysely<Database>, TableWrites[]>();

/**
 * Transactions (or views of one) whose put-off writes are left for their owner to take ({@link collectWrites}):
 * {@link runDeferredWrites} leaves them in place.
 */
const collecting = new WeakSet<Kysely<Database>>();

/**
 * Makes {@link runDeferredWrites} on `db` leave its put-off writes for {@link takeDeferredWrites}: the owner of a
 * transaction shared by several parts runs every part's writes in one group at its end
 * (docs/decisions/0082-recorder-turns-on-postgres.md).
 */
export function collectWrites(db: Kysely<Database>): void {
  collecting.add(db);
}

/** Takes the writes put off in `db` ({@link deferWrites}) and not yet run, in order; none are left behind. */
export function takeDeferredWrites(db: Kysely<Database>): TableWrites[] {
  const pending = deferred.get(db) ?? [];
  deferred.delete(db);
  return pending;
}

/**
 * Puts the writes of `tables` off until the next {@link runWriteGroup} (or {@link runDeferredWrites}) in the same
 * transaction `db`, which runs them first, in the order they were put off, in its group: on PostgreSQL one more
 * clause of its statement instead of a statement of their own (docs/decisions/0056-write-groups.md). The caller
 * promises what {@link runWriteGroup} asks of a group (distinct tables that do not read each other), that nothing
 * reads these rows before that group ran, and that the transaction's owner calls {@link runDeferredWrites} before
 * the commit (the event recorder does at the end of each batch, src/events/recorder.ts).
 */
export function deferWrites(db: Kysely<Database>, tables: readonly TableWrites[]): void {
  const pending = deferred.get(db);
  if (pending === undefined) deferred.set(db, [...tables]);
  else pending.push(...tables);
}

/** Options of {@link runWriteGroup} and {@link runDeferredWrites}. */
export interface WriteGroupOptions {
  /**
   * The group is the transaction's last statement: its answer is not waited for where the `commit` can go out behind
   * it (`runLast`, src/store/last-statement.ts, docs/decisions/0063-pipelined-commit.md), and its failure is then the
   * commit's. Default false.
   */
  last?: boolean;
}

/**
 * Runs the writes put off in transaction `db` ({@link deferWrites}) now, as one group; nothing when none are, or when
 * `db` leaves them to its owner ({@link collectWrites}).
 * @throws what the store throws (the transaction then rolls back); with `last`, where the group is not waited for,
 *   its failure is the commit's.
 */
export async function runDeferredWrites(
  db: Kysely<Database>,
  options: WriteGroupOptions = {},
): Promise<void> {
  if (deferred.has(db) && !collecting.has(db)) await runWriteGroup(db, [], options);
}

/**
 * Runs the writes of several tables inside `db` (a transaction), each table's in order, after any writes put off
 * in it ({@link deferWrites})
 * (docs/decisions/0056-write-groups.md).
 *
 * On PostgreSQL, when every table's rows fit one statement and their parameters together stay within
 * {@link MAX_GROUP_PARAMETERS}, the statements run as one: each but the last becomes a data-modifying `WITH`
 * clause of the last, so the group costs one round trip instead of one per table. PostgreSQL runs every clause of
 * such a statement to completion, against one snapshot, and checks foreign keys at the statement's end, so a row
 * may reference a row inserted by another clause of the group (PostgreSQL documentation, "WITH Queries", section
 * "Data-Modifying Statements in WITH"). The clauses do not see each other's rows and their order is not defined:
 * group only writes of distinct tables that do not read each other (the caller's promise). A table whose rows span
 * several statements, and every write on SQLite (which has no data-modifying `WITH`), run one statement after the
 * other, as before.
 * @throws what the store throws (the transaction then rolls back; store faults are `store_unavailable`,
 *   docs/decisions/0011-store-faults.md).
 */
export async function runWriteGroup(
  db: Kysely<Database>,
  tables: readonly TableWrites[],
  options: WriteGroupOptions = {},
): Promise<void> {
  const pending = deferred.get(db);
  if (pending !== undefined) deferred.delete(db);
  const postgres = isPostgres(db);
  const writes = statementsOf(db, [...(pending ?? []), ...tables], postgres);
  const single = writes.every((table) => table.length === 1) && distinctTables(writes);
  let statements: CompiledQuery[] = writes.flat();
  if (writes.length > 1 && single && postgres) {
    const parameters = statements.reduce((sum, query) => sum + query.parameters.length, 0);
    if (parameters <= MAX_GROUP_PARAMETERS) statements = [groupedStatement(statements)];
  }
  const last = options.last === true ? statements.pop() : undefined;
  for (const query of statements) await db.executeQuery(query);
  if (last !== undefined) await runLast(db, last);
}

/** A table's statements, and the table when they are a row set's (to keep one row set a table in a statement). */
type Statements = CompiledQuery[] & { table?: string };

/**
 * The statements of `writes`, empty ones dropped, in order. On PostgreSQL the rows of one row-set statement merge
 * into one statement at the place of its first writes (docs/decisions/0083-row-set-inserts.md): the writes of a
 * group are of tables that do not read each other, so moving a table's later rows up to its first does not change
 * what is written. Rows whose key is already among the merged rows ({@link RowSetStatement.keyOf}) start a statement
 * of their own, after the first.
 */
function statementsOf(db: Kysely<Database>, writes: readonly TableWrites[], postgres: boolean): Statements[] {
  const out: (Statements | MergedRows)[] = [];
  for (const table of writes) {
    if (!isRowSet(table)) {
      if (table.length > 0) out.push([...table]);
      continue;
    }
    if (table.rows.length === 0) continue;
    if (!postgres) {
      out.push(Object.assign(table.statement.listQueries(db, table.rows), { table: table.statement.table }));
      continue;
    }
    const into = out.find(
      (merged): merged is MergedRows =>
        merged instanceof MergedRows && merged.statement === table.statement && merged.accepts(table.rows),
    );
    if (into !== undefined) into.add(table.rows);
    else out.push(new MergedRows(table.statement, table.rows));
  }
  return out.map((entry) =>
    entry instanceof MergedRows
      ? Object.assign([entry.statement.recordSetQuery(db, entry.rows)], { table: entry.statement.table })
      : entry,
  );
}

/** Whether no table has two row-set statements among `writes` (one clause per row set a table in a group). */
function distinctTables(writes: readonly Statements[]): boolean {
  const seen = new Set<string>();
  for (const statements of writes) {
    if (statements.table === undefined) continue;
    if (seen.has(statements.table)) return false;
    seen.add(statements.table);
  }
  return true;
}

function isRowSet(table: TableWrites): table is RowSetWrites {
  return !Array.isArray(table);
}

/** The rows of one row-set statement gathered from a group's writes, with the keys they hold (for upserts). */
class MergedRows {
  readonly rows: object[];
  readonly #keys: Set<string> | undefined;

  constructor(
    readonly statement: RowSetStatement<object>,
    rows: readonly object[],
  ) {
    this.rows = [...rows];
    const keyOf = statement.keyOf;
    this.#keys = keyOf === undefined ? undefined : new Set(rows.map((row) => keyOf(row)));
  }

  /** Whether `rows` can join: none of their keys is among the rows already here. */
  accepts(rows: readonly object[]): boolean {
    const keyOf = this.statement.keyOf;
    const keys = this.#keys;
    return keyOf === undefined || keys === undefined || rows.every((row) => !keys.has(keyOf(row)));
  }

  add(rows: readonly object[]): void {
    this.rows.push(...rows);
    const keyOf = this.statement.keyOf;
    if (keyOf !== undefined) for (const row of rows) this.#keys?.add(keyOf(row));
  }
}

/**
 * One PostgreSQL statement running `queries` (at least two): `with w1 as (q1), …, wN-1 as (qN-1) qN`, every
 * query's `$n` parameters renumbered after those of the queries before it. When a query is to be planned at each
 * run (it starts with `PLAN_EACH_RUN`, src/store/pg-statements.ts), so is the statement: the mark moves to its start.
 * @throws RangeError when a query's text has an unterminated quote (not SQL this store writes).
 */
export function groupedStatement(queries: readonly CompiledQuery[]): CompiledQuery {
  const parts: string[] = [];
  const parameters: unknown[] = [];
  let planEachRun = false;
  for (const [index, query] of queries.entries()) {
    const own = query.sql.startsWith(PLAN_EACH_RUN);
    planEachRun ||= own;
    const text = renumberParameters(
      own ? query.sql.slice(PLAN_EACH_RUN.length).trimStart() : query.sql,
      parameters.length,
    );
    parameters.push(...query.parameters);
    parts.push(index === queries.length - 1 ? text : `w${index + 1} as (${text})`);
  }
  const last = parts.pop() as string;
  return CompiledQuery.raw(
    `${planEachRun ? `${PLAN_EACH_RUN} ` : ''}with ${parts.join(', ')} ${last}`,
    parameters,
  );
}

/**
 * `text` with each parameter reference `$n` outside quoted strings and identifiers moved to `$(n + offset)`.
 * @throws RangeError on an unterminated quoted string or identifier.
 */
export function renumberParameters(text: string, offset: number): string {
  if (offset === 0) return text;
  let out = '';
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    if (char === "'" || char === '"') {
      // A quoted string or identifier, a doubled quote standing for one: copied as it is.
      let end = i + 1;
      for (;;) {
        end = text.indexOf(char, end);
        if (end === -1) throw new RangeError(`unterminated ${char} in statement: ${text}`);
        if (text[end + 1] === char) end += 2;
        else break;
      }
      out += text.slice(i, end + 1);
      i = end + 1;
      continue;
    }
    if (char === '$') {
      let end = i + 1;
      while (end < text.length && isDigit(text.charCodeAt(end))) end += 1;
      if (end > i + 1) {
        out += `$${Number(text.slice(i + 1, end)) + offset}`;
        i = end;
        continue;
      }
    }
    out += char;
    i += 1;
  }
  return out;
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}
