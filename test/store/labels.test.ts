/**
 * The `labels` and `chat_labels` store (migration 0020, docs/decisions/0045-business-labels.md) and its projection:
 * a label edit creates or replaces a label, a deletion drops it and its chat rows, chat labels come and go, a chat
 * row naming a label never seen is kept but not listed, lists are in numeric id order, instances apart, rows gone
 * with their instance. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { LabelProjection } from '../../src/events/label-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { createInstance, deleteInstance } from '../../src/store/instances.ts';
import { findLabel, listChatLabels, listLabels } from '../../src/store/labels.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const ANA = '5511988887777@s.whatsapp.net';

for (const dialect of testDialects()) {
  describe(`labels store and projection (docs/decisions/0045-business-labels.md) [${dialect}]`, () => {
    let ts: TestStore;
    let one: string;
    let two: string;
    let recorder: EventRecorder;
    let now = 1_000;
    const label = (id: string, name: string, color = 0, predefinedId: string | null = null) => ({
      type: 'label' as const,
      label: { id, name, color, predefinedId, deleted: false },
    });
    const chatLabel = (chat: string, labelId: string, labeled: boolean) => ({
      type: 'chat-label' as const,
      change: { chat, labelId, labeled },
    });

    before(async () => {
      ts = await createTestStore(dialect);
      const org = await createOrganization(ts.store.db, { name: 'labels', plan: 'pro' });
      one = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'one' })).id;
      two = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'two' })).id;
      recorder = new EventRecorder(ts.store.db, [new LabelProjection(() => now)], pino({ level: 'silent' }));
    });
    after(() => ts.cleanup());

    it('label events create and replace labels, listed in numeric id order', async () => {
      await recorder.record(one, label('10', 'Paid', 4));
      await recorder.record(one, label('2', 'New order', 1, '2'));
      await recorder.record(one, label('9', 'Lead'));
      now = 2_000;
      await recorder.record(one, label('9', 'Hot lead', 7));
      assert.deepEqual(await listLabels(ts.store.db, one), [
        { id: '2', name: 'New order', color: 1, predefinedId: '2' },
        { id: '9', name: 'Hot lead', color: 7, predefinedId: null },
        { id: '10', name: 'Paid', color: 4, predefinedId: null },
      ]);
      const row = await ts.store.db
        .selectFrom('labels')
        .selectAll()
        .where('instance_id', '=', one)
        .where('label_id', '=', '9')
        .executeTakeFirst();
      assert.deepEqual(row, {
        instance_id: one,
        label_id: '9',
        name: 'Hot lead',
        color: 7,
        predefined_id: null,
        updated_at: 2_000,
      });
      assert.deepEqual(await listLabels(ts.store.db, two), [], 'another instance apart');
    });

    it('chat labels come and go; a label never seen is kept but not listed; repeats are idempotent', async () => {
      await recorder.record(one, chatLabel(ANA, '10', true));
      await recorder.record(one, chatLabel(ANA, '9', true));
      await recorder.record(one, chatLabel(ANA, '9', true));
      await recorder.record(one, chatLabel(ANA, '77', true));
      assert.deepEqual(
        (await listChatLabels(ts.store.db, one, ANA)).map((l) => l.id),
        ['9', '10'],
      );
      await recorder.record(one, chatLabel(ANA, '10', false));
      await recorder.record(one, chatLabel(ANA, '10', false));
      assert.deepEqual(
        (await listChatLabels(ts.store.db, one, ANA)).map((l) => l.id),
        ['9'],
      );
      const rows = await ts.store.db
        .selectFrom('chat_labels')
        .select(['label_id'])
        .where('instance_id', '=', one)
        .orderBy('label_id')
        .execute();
      assert.deepEqual(rows, [{ label_id: '77' }, { label_id: '9' }]);
      // The label arrives after the chat named it: now it is listed.
      await recorder.record(one, label('77', 'Late'));
      assert.deepEqual(
        (await listChatLabels(ts.store.db, one, ANA)).map((l) => l.id),
        ['9', '77'],
      );
    });

    it('a deleted label loses its row and its chat rows', async () => {
      await recorder.record(one, {
        type: 'label',
        label: { id: '9', name: 'Hot lead', color: 7, predefinedId: null, deleted: true },
      });
      assert.equal(await findLabel(ts.store.db, one, '9'), undefined);
      assert.deepEqual(
        (await listChatLabels(ts.store.db, one, ANA)).map((l) => l.id),
        ['77'],
      );
    });

    it('rows go with their instance (cascade)', async () => {
      await recorder.record(two, label('1', 'Other'));
      assert.equal(await deleteInstance(ts.store.db, one), true);
      for (const table of ['labels', 'chat_labels'] as const) {
        const rows = await ts.store.db.selectFrom(table).select('instance_id').execute();
        assert.deepEqual(
          rows.map((r) => r.instance_id),
          table === 'labels' ? [two] : [],
          table,
        );
      }
    });
  });
}
