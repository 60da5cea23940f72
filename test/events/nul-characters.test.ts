/**
 * A platform event whose text holds the NUL character (U+0000): a peer's client may put one in a message's text or
 * its push name, which reach parley as the platform handed them over. PostgreSQL's text cannot hold the character,
 * and its JSON parser refuses the `\u0000` escape of a row set (docs/decisions/0083-row-set-inserts.md): the recording
 * failed with 22P05, a permanent error, and the message, already acknowledged, was lost
 * (docs/decisions/0011-store-faults.md). So did a push name longer than the store's 200 characters (22001). Runs on
 * SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { Instance } from '../../src/domain/instance.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { OutboxProjection } from '../../src/events/outbox-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import type { Database } from '../../src/store/schema.ts';
import { capturingLogger } from '../baileys/support.ts';
import { createTestStore, testDialects } from '../support/store.ts';

const PEER = '5511988887777@s.whatsapp.net';

/** An organization with a live instance named `name` in `db`, and a recorder of messages and their webhook events. */
async function recorderFor(
  db: Kysely<Database>,
  name: string,
): Promise<{ instance: Instance; recorder: EventRecorder }> {
  const org = await adminCreateOrg(db, { name: `o${Math.random()}`, plan: 'pro' });
  const instance = await adminCreateInstance(db, { org: org.id, env: 'live', name });
  const { logger } = capturingLogger();
  const outbox = new OutboxProjection({ clock: Date.now, maxAttempts: 3, onCommitted: () => undefined });
  const recorder = new EventRecorder(db, [new MessageProjection(Date.now), outbox], logger);
  return { instance, recorder };
}

for (const dialect of testDialects()) {
  describe(`a platform event holding text the store cannot hold as it is [${dialect}]`, () => {
    it('an incoming message with NUL in its push name and text is recorded, and its event made', async () => {
      const ts = await createTestStore(dialect);
      try {
        const db = ts.store.db;
        const { instance, recorder } = await recorderFor(db, 'nul');
        await recorder.record(instance.id, {
          type: 'message',
          message: {
            id: '3EB0NUL0000000001',
            source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
            pushName: 'A\u0000na',
            timestamp: Date.now(),
            content: { kind: 'text', text: 'a\u0000b' },
          },
        });
        const rows = await db
          .selectFrom('messages')
          .select(['id', 'content', 'push_name'])
          .where('instance_id', '=', instance.id)
          .execute();
        assert.deepEqual(
          rows.map((row) => [row.id, JSON.parse(row.content).text]),
          [['3EB0NUL0000000001', 'a\u0000b']],
          'the text kept as the platform gave it (its JSON escapes the character)',
        );
        // PostgreSQL's text cannot hold the character: left out there; SQLite keeps it.
        assert.deepEqual(
          rows.map((row) => row.push_name),
          [dialect === 'postgres' ? 'Ana' : 'A\u0000na'],
        );
        const events = await db
          .selectFrom('webhook_events')
          .select(['type', 'payload'])
          .where('instance_id', '=', instance.id)
          .execute();
        assert.deepEqual(
          events.map((event) => [event.type, JSON.parse(event.payload).event.info.id]),
          [['Message', '3EB0NUL0000000001']],
        );
      } finally {
        await ts.cleanup();
      }
    });

    it('an incoming message whose push name is longer than the store keeps (200 characters) is recorded', async () => {
      const ts = await createTestStore(dialect);
      try {
        const db = ts.store.db;
        const { instance, recorder } = await recorderFor(db, 'long');
        await recorder.record(instance.id, {
          type: 'message',
          message: {
            id: '3EB0LONGNAME00001',
            source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
            pushName: 'N'.repeat(300),
            timestamp: Date.now(),
            content: { kind: 'text', text: 'hi' },
          },
        });
        const rows = await db
          .selectFrom('messages')
          .select(['id', 'push_name'])
          .where('instance_id', '=', instance.id)
          .execute();
        assert.deepEqual(rows, [{ id: '3EB0LONGNAME00001', push_name: 'N'.repeat(200) }]);
        const peers = await db
          .selectFrom('chat_peers')
          .select(['jid', 'push_name'])
          .where('instance_id', '=', instance.id)
          .execute();
        assert.deepEqual(peers, [{ jid: PEER, push_name: 'N'.repeat(200) }]);
        const events = await db
          .selectFrom('webhook_events')
          .select('type')
          .where('instance_id', '=', instance.id)
          .execute();
        assert.deepEqual(events, [{ type: 'Message' }]);
      } finally {
        await ts.cleanup();
      }
    });
  });
}
