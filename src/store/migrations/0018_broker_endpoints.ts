import type { Kysely } from 'kysely';

/**
 * Broker endpoints (docs/decisions/0037-broker-endpoints.md): `webhook_endpoints.url_sealed` holds the whole
 * `amqp(s)://` or `nats://` URL sealed with the SecretBox when it carries a password or token; `url` then keeps the
 * URL with that secret masked, as the API shows it and the attempts log records it. Null for an HTTPS endpoint and
 * for a broker URL without credentials.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('url_sealed', 'text').execute();
}

/** Drops the column again. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').dropColumn('url_sealed').execute();
}
