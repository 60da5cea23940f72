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
