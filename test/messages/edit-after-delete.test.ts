/**
 * An edit that arrives after its message was deleted for everyone. A phone shows "This message was deleted"
 * and ignores later edits; parley's stored message must stay deleted (docs/decisions/0026: "a deletion drops the
 * content and keeps the message's place"), not show the edited text again beside its `deletedAt`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, OWN, PEER, storedBodies } from './support.ts';

for (const dialect of testDialects()) {
  describe(`an edit after a deletion for everyone [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('the stored message stays deleted: no text comes back', async () => {
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'my card is 1234' });
      const id = inbound.body.data.id as string;
      assert.equal((await t.call('POST', '/v1/sandbox/delete', { phone: PEER, id })).status, 200);
      await t.call('POST', '/v1/sandbox/edit', { phone: PEER, id, body: 'my card is 5678' });
      const edits = (await storedBodies(t, 'MessageUpdate')).filter(
        (b) => b.event.messageId === id && b.event.kind === 'edit',
      );
      assert.deepEqual(edits, [], 'a MessageUpdate reports an edit of a deleted message');
      const read = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(read.status, 200);
      assert.ok(read.body.data.deletedAt, 'still deleted');
      assert.deepEqual(read.body.data.message, { conversation: '' }, 'a deleted message shows text again');
    });
  });
}
