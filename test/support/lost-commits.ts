import { type DatabaseConnection, PostgresDriver } from 'kysely';

/**
 * Makes every PostgreSQL commit of this process ask `lose` once it was carried out: when it answers true, the commit
 * fails as a reset connection although it was kept, as when the connection to a remote store breaks between a
 * transaction's commit and its answer (docs/decisions/0011-store-faults.md). → `restore`, which puts the driver's
 * commit back, and the count of answers lost so far.
 */
export function loseCommitAnswers(lose: () => boolean): { restore(): void; lost(): number } {
  const commit = PostgresDriver.prototype.commitTransaction;
  let lost = 0;
  PostgresDriver.prototype.commitTransaction = async function (
    this: PostgresDriver,
    connection: DatabaseConnection,
  ) {
    await commit.call(this, connection);
    if (lose()) {
      lost += 1;
      throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    }
  };
  return {
    restore: () => {
      PostgresDriver.prototype.commitTransaction = commit;
    },
    lost: () => lost,
  };
}

/** A one-shot lost commit answer armed by a test, see {@link loseNextCommitAfter}. */
export interface LostCommitAfter {
  /** The store's fault hook (`createTestStore`'s `faults`): give it every statement's SQL text. */
  seen(sql: string): void;
  /** While armed, the next commit after a statement matching the pattern is carried out and its answer lost. */
  arm(armed: boolean): void;
  /** Answers lost so far. */
  lost(): number;
  /** Puts the driver's commit back. */
  restore(): void;
}

/**
 * {@link loseCommitAnswers} for one commit at a time: once armed, the first commit that follows a statement whose SQL
 * matches `statement` (seen through {@link LostCommitAfter.seen}) is kept and its answer lost; then nothing more
 * until armed again.
 */
export function loseNextCommitAfter(statement: RegExp): LostCommitAfter {
  let armed = false;
  let matched = false;
  const commits = loseCommitAnswers(() => {
    if (!armed || !matched) return false;
    armed = false;
    matched = false;
    return true;
  });
  return {
    seen(sql) {
      if (armed && statement.test(sql)) matched = true;
    },
    arm(value) {
      armed = value;
      if (!value) matched = false;
    },
    lost: commits.lost,
    restore: commits.restore,
  };
}
