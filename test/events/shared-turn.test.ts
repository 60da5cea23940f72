import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { textMessage } from '../webhooks/support.ts';

/**
 * The services' recorder with every projection (messages, the webhook outbox, the send queue, the live feed) when
 * several instances' events arrive in the same turn: on SQLite they share the turn's transaction
 * (docs/decisions/0051-turn-groups.md), on PostgreSQL the recorder's own, with their numbers and rows taken and
 * written in one statement each (docs/decisions/0082-recorder-turns-on-postgres.md). Either way each instance gets its
 * own messages and its own `sequence`, 1, 2, 3… in emission order (docs/decisions/0005-outbox-and-delivery.md).
 */
for (const dialect of testDialects()) {
  describe(`several instances' events in one turn (${dialect})`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect, webhookWorker: { start: false } });
    });
    after(() => t.close());

    it('each instance keeps its own messages and its own sequence, in emission order', async () => {
      // The free plan allows two test instances; the third is a live one (only its rows matter here).
      const instances = [t.instance, await t.newInstance(), await t.newInstance('live')];
      const rounds = 4;
      const recorded: Promise<void>[] = [];
      // Interleaved, all in one turn: instance 0's first, instance 1's first, …, then each one's second.
      for (let round = 1; round <= rounds; round++) {
        for (const [index, instance] of instances.entries()) {
          recorded.push(
            t.services.recorder.record(
              instance.id,
              textMessage(`i${index} r${round}`, { phone: `55119888800${index}` }),
            ),
          );
        }
      }
      await Promise.all(recorded);
      const db = t.testStore.store.db;
      for (const [index, instance] of instances.entries()) {
        const events = await db
          .selectFrom('webhook_events')
          .select(['sequence', 'payload'])
          .where('instance_id', '=', instance.id)
          .orderBy('sequence')
          .execute();
        assert.deepEqual(
          events.map((event) => [
            Number(event.sequence),
            JSON.parse(event.payload).event.message.conversation,
          ]),
          Array.from({ length: rounds }, (_, round) => [round + 1, `i${index} r${round + 1}`]),
          `instance ${index}`,
        );
        const messages = await db
          .selectFrom('messages')
          .select(['chat'])
          .where('instance_id', '=', instance.id)
          .execute();
        assert.deepEqual(
          messages.map((message) => message.chat),
          Array.from({ length: rounds }, () => `55119888800${index}@s.whatsapp.net`),
        );
      }
    });
  });
}
