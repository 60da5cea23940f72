import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { IDEMPOTENCY_LOCK_MS } from '../../src/app/idempotency.ts';
import { appFor, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { post, sentRows } from './idempotency-support.ts';

/**
 * A send whose process died after its message went out and before its answer was kept under its `Idempotency-Key`
 * (docs/decisions/0010-idempotency.md: "A send retried with its key never produces a second message"). The death
 * is played, deterministically, by the store refusing the dead process's later statements on the key (the keep and
 * the lock's renewals, the statements naming the claim's token) from the moment its send job is written: from the
 * store's side that is what a kill -9 at that instant leaves, a claim nobody renews and no answer. The client never
 * heard the answer and retries with its key once the claim's lock passed.
 */
for (const dialect of testDialects()) {
  describe(`Idempotency-Key: a send whose process died before its answer was kept [${dialect}]`, () => {
    let t: TestApp;
    /** Set when the send job is written: the process is dead for the key's later statements. */
    let dying = false;
    let armed = false;
    before(async () => {
      const testStore = await createTestStore(dialect, {
        faults: (text) => {
          if (armed && /^insert into "send_jobs"/.test(text)) dying = true;
          if (dying && /^update "idempotency_keys" .* where .*"token" = /.test(text)) {
            throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
          }
        },
      });
      t = await appFor(dialect, { testStore });
      await loginSandbox(t, OWN);
    });
    after(async () => {
      dying = false;
      await t.close();
      await t.testStore.cleanup();
    });

    it('the retry after the lock passed does not send the message a second time', async () => {
      const headers = { 'idempotency-key': 'died-after-send' };
      const payload = JSON.stringify({ phone: PEER, body: 'sent once' });
      const before = await sentRows(t);
      armed = true;
      const first = await post(t, '/v1/messages/send', payload, headers);
      armed = false;
      assert.ok(dying, 'the send job was written before the process died');
      // The client never heard this answer (its process died); the message went out.
      assert.equal(first.statusCode, 200, first.body);
      t.clock.advance(IDEMPOTENCY_LOCK_MS + 1);
      const retried = await post(t, '/v1/messages/send', payload, headers);
      const sent = (await sentRows(t)).filter((id) => !before.includes(id));
      assert.deepEqual(
        sent,
        [JSON.parse(first.body).data.id],
        `one message for one key; the retry answered ${retried.statusCode} ${retried.body}`,
      );
    });
  });
}
