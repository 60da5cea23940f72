import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The sandbox's simulated world checks each send's recipient (docs/decisions/0004-sandbox.md); the user reads of one
 * turn of the event loop share one store read (docs/decisions/0049-turn-batched-reads.md), and the session keeps
 * what it read and wrote (docs/decisions/0004-sandbox.md), counted on the store's auth port (`SqlAuthStateStore.get`
 * of the `sandbox-user` category).
 */
for (const dialect of testDialects()) {
  describe(`the sandbox world's user reads [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    let counting = false;
    let userReads = 0;
    const get = SqlAuthStateStore.prototype.get;

    before(async () => {
      testStore = await createTestStore(dialect);
      // Counts the store reads of the world's user definitions (the auth port's `sandbox-user` category).
      SqlAuthStateStore.prototype.get = function countedGet(category, ids) {
        if (counting && category === 'sandbox-user') userReads += 1;
        return get.call(this, category, ids);
      };
      t = await createTestApp({ testStore });
      await loginSandbox(t);
      const defined = await t.call('POST', '/v1/sandbox/users', {
        phone: '5511977770002',
        registered: false,
      });
      assert.equal(defined.status, 200);
    });
    after(async () => {
      SqlAuthStateStore.prototype.get = get;
      await t.close();
      await testStore.cleanup();
    });

    it('six concurrent sends look their recipients up in one read a lookup, each answered by its own definition', async () => {
      const phones = ['5511977770001', '5511977770002', '5511977770003', '5511977770004', '5511977770005'];
      userReads = 0;
      counting = true;
      let answers: { status: number; body: { error?: unknown } }[];
      try {
        answers = await Promise.all(
          [...phones, '5511977770001'].map((phone, k) =>
            t.call('POST', '/v1/messages/send', { phone, body: `hello ${k}` }),
          ),
        );
      } finally {
        counting = false;
      }
      assert.deepEqual(
        answers.map((answer) => answer.status),
        [200, 422, 200, 200, 200, 200],
      );
      assert.deepEqual(answers[1]?.body.error, {
        code: 422,
        message: 'recipient 5511977770002 is not registered on the platform',
      });
      // Each send looks its recipient up twice: the registration check before it is stored (src/app/messaging.ts),
      // then the simulated platform's own check of the chat. The first lookups of the turn share one read (eleven
      // reads, one per lookup, before the reads were shared); the second ones, and the user the session defined,
      // are answered from what the session keeps of its world (src/engines/sandbox/owned-state.ts).
      assert.equal(userReads, 1, 'one read of the world for the six sends');

      userReads = 0;
      counting = true;
      try {
        const again = await t.call('POST', '/v1/messages/send', { phone: '5511977770004', body: 'again' });
        assert.equal(again.status, 200);
      } finally {
        counting = false;
      }
      assert.equal(userReads, 0, 'a recipient the session read before is not read again');
    });

    it('a definition stored before a send is what the send sees', async () => {
      const again = await t.call('POST', '/v1/sandbox/users', { phone: '5511977770002', registered: true });
      assert.equal(again.status, 200);
      const sent = await t.call('POST', '/v1/messages/send', { phone: '5511977770002', body: 'now you are' });
      assert.equal(sent.status, 200);
      const gone = await t.call('POST', '/v1/sandbox/users', { phone: '5511977770003', registered: false });
      assert.equal(gone.status, 200);
      const refused = await t.call('POST', '/v1/messages/send', {
        phone: '5511977770003',
        body: 'not any more',
      });
      assert.equal(refused.status, 422);
    });
  });
}
