import pg from 'pg';
import type { TestStore } from './store.ts';

/**
 * Real broken PostgreSQL connections for tests of a store that goes away mid-write (docs/decisions/0011-store-
 * faults.md): node-postgres's client is made to close its socket right after a chosen query went out, so the client
 * fails that query ("Connection terminated") while the server, which got it, carries it out; and a deferred
 * constraint trigger (`hold_commit`) can hold a transaction's commit on the server, so the commit is still running
 * when the client gives up and its next try, on another connection, begins.
 */

/** How long a `hold_commit` trigger holds a commit on the server, seconds. */
export const HOLD_SECONDS = 0.6;

/**
 * What {@link breakConnections}' `decide` answers for a query the client just wrote: close the connection on the next
 * turn (`'after'`: the query is on the wire, its answer is never read), close it at once (`'now'`: the query may not
 * have left), or leave it (undefined).
 */
export type BreakDecision = 'after' | 'now' | undefined;

/** The parts of node-postgres's client these tests reach into. */
interface RawClient {
  connection: { stream: { destroy(): void } };
}

/** The SQL text of a `pg.Client.query` call (a string, or a config object's `text`). */
function textOf(first: unknown): string | undefined {
  if (typeof first === 'string') return first;
  if (typeof first === 'object' && first !== null && 'text' in first) {
    const text = (first as { text: unknown }).text;
    return typeof text === 'string' ? text : undefined;
  }
  return undefined;
}

/**
 * Calls `decide` with the text of every query any node-postgres client of this process writes, and the client (an
 * object to key a test's own state by, such as "this connection wrote the statement whose commit is to break"),
 * closing that client's connection as it answers. @returns the restore of node-postgres's own `query`.
 */
export function breakConnections(decide: (text: string, client: object) => BreakDecision): () => void {
  const query = pg.Client.prototype.query;
  // A generic override of an overloaded method: the arguments go through untouched.
  (pg.Client.prototype as { query: (...args: unknown[]) => unknown }).query = function (
    this: pg.Client & RawClient,
    ...args: unknown[]
  ) {
    const result = (query as (...a: unknown[]) => unknown).apply(this, args);
    const text = textOf(args[0]);
    const decision = text === undefined ? undefined : decide(text, this);
    if (decision === 'now') this.connection.stream.destroy();
    else if (decision === 'after') setImmediate(() => this.connection.stream.destroy());
    return result;
  } as typeof pg.Client.prototype.query;
  return () => {
    pg.Client.prototype.query = query;
  };
}

/**
 * Breaks the connection of the next webhook claim as its `commit` goes out, once: the claim's last statement writes
 * its heads' attempt rows and its `commit` follows on the same connection, which is closed as soon as that commit is
 * written, so the server may commit the claim while the client sees "Connection terminated". → `broken()`, how many
 * commits were broken (0 or 1), and `restore`, which puts node-postgres's own `query` back.
 */
export function breakNextClaimCommit(): { broken: () => number; restore: () => void } {
  let broken = 0;
  const carrying = new WeakSet<object>();
  const restore = breakConnections((text, client) => {
    if (broken > 0) return undefined;
    if (/^insert into "webhook_attempts"/.test(text)) carrying.add(client);
    else if (/^\s*commit/i.test(text) && carrying.has(client)) {
      broken += 1;
      return 'after';
    }
    return undefined;
  });
  return { broken: () => broken, restore };
}

/** Runs `statements` one after the other on a connection of its own to the PostgreSQL database of `store`. */
export async function adminSql(
  store: Pick<TestStore, 'database'>,
  statements: readonly string[],
): Promise<void> {
  if (store.database.dialect !== 'postgres') throw new Error('adminSql needs a PostgreSQL test store');
  const admin = new pg.Client({ connectionString: store.database.url });
  await admin.connect();
  try {
    for (const statement of statements) await admin.query(statement);
  } finally {
    await admin.end();
  }
}

/**
 * The statements creating `<schema>.hold_commit()`, a trigger function that sleeps {@link HOLD_SECONDS}. With
 * `switched`, it holds only while `<schema>.hold_switch` says so (created with `held` = `switched`) and turns the
 * switch off as it holds, so only the first commit is held and a try again is not ({@link armHold} turns it on).
 */
export function holdCommitFunction(schema: string, switched?: boolean): string[] {
  if (switched === undefined)
    return [
      `create function ${schema}.hold_commit() returns trigger language plpgsql as $$
       begin perform pg_sleep(${HOLD_SECONDS}); return null; end $$`,
    ];
  return [
    `create table ${schema}.hold_switch (held boolean not null)`,
    `insert into ${schema}.hold_switch values (${switched})`,
    `create function ${schema}.hold_commit() returns trigger language plpgsql as $$
     begin
       if (select held from ${schema}.hold_switch) then
         update ${schema}.hold_switch set held = false;
         perform pg_sleep(${HOLD_SECONDS});
       end if;
       return null;
     end $$`,
  ];
}

/**
 * The statement creating constraint trigger `name` on `<schema>.<table>`, run at commit for each row `event`
 * (`insert`, `update`, `insert or update`) touches when `when` holds (a condition on `new`, and `old` for an update;
 * none: every row): it calls `hold_commit()` ({@link holdCommitFunction}).
 */
export function holdCommitTrigger(
  schema: string,
  name: string,
  event: string,
  table: string,
  when?: string,
): string {
  return `create constraint trigger ${name} after ${event} on ${schema}.${table}
    deferrable initially deferred for each row ${when === undefined ? '' : `when (${when})`}
    execute function ${schema}.hold_commit()`;
}

/** Turns on the switch of a switched `hold_commit()`: the next commit it sees is held. */
export function armHold(store: Pick<TestStore, 'database' | 'schema'>): Promise<void> {
  return adminSql(store, [`update ${store.schema ?? 'public'}.hold_switch set held = true`]);
}
