import type { Kysely } from 'kysely';

/**
 * Receipts that came before their send was recorded (docs/decisions/0104-receipts-before-their-send.md):
 * `held_receipts` keeps a recipient's receipt naming the id of a send job still `pending` or `sending` (relayed, its
 * outcome unknown: the platform's ack was lost, or the process stopped mid-relay), with no stored message yet, until
 * the job's message is recorded (then its state is applied and its `ReadReceipt` follows the `Message`) or the job
 * otherwise ends. One row per job, state and acknowledging user: `message_id` (the job's id), `state` (`delivered`,
 * `read`, `played`), `sender` (the user who acknowledged, as the receipt named them), `receipt` (the receipt's
 * `source` and `timestamp` as JSON, as the engine reported them), `held_at` epoch ms
 * (docs/decisions/0027-times-as-epoch-ms.md). Primary key (instance_id, message_id, state, sender); rows go with
 * their job (cascade), so they last no longer than the send job they wait for.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('held_receipts')
    .addColumn('instance_id', 'varchar(36)', (c) => c.notNull())
    .addColumn('message_id', 'varchar(128)', (c) => c.notNull())
    .addColumn('state', 'varchar(10)', (c) => c.notNull())
    .addColumn('sender', 'varchar(160)', (c) => c.notNull())
    .addColumn('receipt', 'text', (c) => c.notNull())
    .addColumn('held_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('held_receipts_pk', ['instance_id', 'message_id', 'state', 'sender'])
    .addForeignKeyConstraint(
      'held_receipts_job',
      ['instance_id', 'message_id'],
      'send_jobs',
      ['instance_id', 'id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
}

/** Drops the table. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('held_receipts').execute();
}
