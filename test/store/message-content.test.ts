/**
 * Changes to a stored message's content do not undo each other (src/store/messages.ts): a new media reference
 * (`setMessageDownload`, docs/decisions/0046-media-re-upload.md) written while an edit or a deletion for everyone
 * is recorded (`applyMessageUpdate`, docs/decisions/0026-chats-edits-polls-and-calls.md) keeps both, whichever
 * reads first. The interleaving is forced: the first writer's read returns, then the other writer (another
 * connection, as another node would) commits, then the first writer writes. Runs on SQLite, and on PostgreSQL
 * when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely, KyselyPlugin, PluginTransformResultArgs, QueryResult, UnknownRow } from 'kysely';
import type { EngineMessage } from '../../src/domain/messages.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { createInstance } from '../../src/store/instances.ts';
import {
  applyMessageUpdate,
  findStoredMessage,
  insertMessages,
  setMessageDownload,
} from '../../src/store/messages.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const ANA = '5511988887777@s.whatsapp.net';

/** A plugin that runs `between` once, right after the first query returning a `content` column has read it. */
function afterFirstContentRead(between: () => Promise<void>): KyselyPlugin & { fired: () => number } {
  let fired = 0;
  return {
    fired: () => fired,
    transformQuery: (args) => args.node,
    async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      const first = args.result.rows[0];
      if (fired === 0 && first && 'content' in first) {
        fired += 1;
        await between();
      }
      return args.result;
    },
  };
}

for (const dialect of testDialects()) {
  describe(`stored message content: a re-upload and an edit or deletion keep both [${dialect}]`, () => {
    let ts: TestStore;
    let other: Store;
    let instanceId: string;
    let n = 0;

    /** Stores a received image with caption-like text and returns its id. */
    const stored = async (): Promise<string> => {
      n += 1;
      const message: EngineMessage = {
        id: `M${n}`,
        source: { chat: ANA, sender: ANA, isFromMe: false, isGroup: false },
        pushName: 'Ana',
        timestamp: 1_760_000_000_000,
        content: { kind: 'image', text: 'Broken part', download: '{"old":true}' },
      };
      await insertMessages(
        ts.store.db,
        instanceId,
        [{ message, state: 'delivered' }],
        '2026-01-01T00:00:00Z',
      );
      return message.id;
    };
    const contentOf = async (id: string) => {
      const row = await findStoredMessage(ts.store.db, instanceId, id);
      assert.ok(row);
      return row.content;
    };
    const update = (id: string, kind: 'edit' | 'delete') => ({
      kind,
      messageId: id,
      source: { chat: ANA, sender: ANA, isFromMe: false, isGroup: false },
      ...(kind === 'edit' ? { text: 'Fixed part' } : {}),
      timestamp: 1_760_000_100_000,
    });

    before(async () => {
      ts = await createTestStore(dialect);
      other = await openStore(ts.database, ts.schema ? { schema: ts.schema, poolSize: 2 } : {});
      const org = await createOrganization(ts.store.db, { name: 'content', plan: 'pro' });
      instanceId = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 'one' })).id;
    });
    after(async () => {
      await other.destroy();
      await ts.cleanup();
    });

    for (const kind of ['edit', 'delete'] as const) {
      it(`an ${kind} recorded between the re-upload's read and write is kept`, async () => {
        const id = await stored();
        const plugin = afterFirstContentRead(async () => {
          assert.equal(await applyMessageUpdate(other.db, instanceId, update(id, kind)), 'changed');
        });
        const db: Kysely<Database> = ts.store.db.withPlugin(plugin);
        assert.equal(await setMessageDownload(db, instanceId, id, '{"moved":true}'), true);
        assert.equal(plugin.fired(), 1, 'the other writer ran in between');
        const content = await contentOf(id);
        assert.equal(content.download, '{"moved":true}');
        if (kind === 'edit') {
          assert.equal(content.text, 'Fixed part');
          assert.equal(content.editedAt, 1_760_000_100_000);
        } else {
          assert.equal(content.text, undefined);
          assert.equal(content.deletedAt, 1_760_000_100_000);
        }
      });

      it(`a re-upload stored between an ${kind}'s read and write is kept`, async () => {
        const id = await stored();
        const plugin = afterFirstContentRead(async () => {
          assert.equal(await setMessageDownload(other.db, instanceId, id, '{"moved":true}'), true);
        });
        const db: Kysely<Database> = ts.store.db.withPlugin(plugin);
        assert.equal(await applyMessageUpdate(db, instanceId, update(id, kind)), 'changed');
        assert.equal(plugin.fired(), 1);
        const content = await contentOf(id);
        assert.equal(content.download, '{"moved":true}');
        assert.equal(
          kind === 'edit' ? content.text : content.deletedAt,
          kind === 'edit' ? 'Fixed part' : 1_760_000_100_000,
        );
      });
    }

    it('a message never stored: false, nothing written', async () => {
      assert.equal(await setMessageDownload(ts.store.db, instanceId, 'NOPE', '{}'), false);
      assert.equal(await applyMessageUpdate(ts.store.db, instanceId, update('NOPE', 'edit')), 'not-stored');
    });
  });
}
