import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { forwardedMessageId } from '../../src/app/messaging.ts';
import { DomainError } from '../../src/domain/errors.ts';
import type { OutgoingContent } from '../../src/domain/messages.ts';
import { LOGGED_OUT_BEFORE_RELAY } from '../../src/sends/logout.ts';
import { settledFlag } from '../sends/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { appFor, messageRow, OWN, PEER } from './support.ts';

/**
 * A send whose account logs out while the send is being accepted, after its session was found logged in and before
 * its job is stored (its content still being built: a media file fetched, say; its id following from its request,
 * under an Idempotency-Key or forwarded by another node, so no engine call sees the logout), is never relayed from
 * the account linked next (docs/decisions/0074-logout-cancels-pending-sends.md): the logout's cancel of the pending
 * sends ran before the job existed, so the acceptance stores nothing and answers `409` (a queued send's job, once its
 * insert found the instance's account generation moved by the logout, test/messages/account-change-at-insert.test.ts).
 * Before, a queued job was stored `pending` after the logout
 * and went out from the next account to link the instance, and a synchronous one waited out its sync wait, or was
 * relayed at once from the next account. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
/** The number linked to the instance after the logout. */
const NEXT_OWN = '5511999990009';

/**
 * Content whose building waits: `built` resolves once the send asked for it, and it answers the text `text` once
 * `release` is called (a media file being fetched, say).
 */
function heldContent(text: string): {
  content: () => Promise<OutgoingContent>;
  built: Promise<void>;
  release: () => void;
} {
  let building = (): void => undefined;
  let release = (): void => undefined;
  const built = new Promise<void>((resolve) => {
    building = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const content = async (): Promise<OutgoingContent> => {
    building();
    await released;
    return { kind: 'text', text, linkPreview: false };
  };
  return { content, built, release };
}

/** A synchronous send's answer to a logout during its acceptance: `409 LOGGED_OUT_BEFORE_RELAY`. */
function loggedOutBeforeRelay(error: unknown): true {
  assert.ok(error instanceof DomainError);
  assert.deepEqual([error.code, error.message], ['conflict', LOGGED_OUT_BEFORE_RELAY]);
  return true;
}

/** A queued send's answer to a logout during its acceptance: `not_logged_in`. */
function notLoggedIn(error: unknown): true {
  assert.ok(error instanceof DomainError);
  assert.equal(error.code, 'not_logged_in');
  return true;
}

for (const dialect of testDialects()) {
  describe(`a queued send accepted across its account's logout [${dialect}]`, () => {
    let t: TestApp;

    before(async () => {
      t = await appFor(dialect);
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('is answered 409 with nothing stored when another account linked while it was built', async () => {
      const { content, built, release } = heldContent('queued across the next login');
      const origin = { forwardId: 'c0ffee00-0000-4000-8000-000000000004' };
      const accepting = t.services.app.messaging.enqueue(t.instance, { phone: PEER }, content, null, origin);
      accepting.catch(() => undefined);
      await built;
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      await loginSandbox(t, NEXT_OWN);
      release();
      await assert.rejects(accepting, notLoggedIn);
      const jobs = await t.services.store.db
        .selectFrom('send_jobs')
        .select('status')
        .where('instance_id', '=', t.instance.id)
        .execute();
      assert.deepEqual(jobs, [], 'nothing stored for the account linked since to relay');
      // Back to the first account for the cases below.
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      await loginSandbox(t, OWN);
    });

    it('is answered 409 with nothing stored when the logout came as it was stored; nothing goes out from the next account', async () => {
      const { content, built, release } = heldContent('accepted across the logout');
      // The logout comes while the job is being stored, after the acceptance's last look at the session.
      const queue = t.services.sendQueue;
      const store = queue.store.bind(queue);
      queue.store = async (job) => {
        // Once: the queue's own method again for every later store.
        delete (queue as { store?: unknown }).store;
        assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
        return store(job);
      };
      // Under an Idempotency-Key (or forwarded by another node) the send's id follows from its request: no engine call
      // between the content and the job's store looks at the session again.
      const origin = { forwardId: 'c0ffee00-0000-4000-8000-000000000001' };
      const accepting = t.services.app.messaging.enqueue(t.instance, { phone: PEER }, content, null, origin);
      accepting.catch(() => undefined);
      await built;
      release();
      await assert.rejects(accepting, notLoggedIn);
      // The logout's transaction moved the instance's account generation before the insert: the insert stored
      // nothing (test/messages/account-change-at-insert.test.ts).
      const jobs = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['id', 'status'])
        .where('instance_id', '=', t.instance.id)
        .execute();
      assert.deepEqual(jobs, []);
      const id = forwardedMessageId(t.instance.id, origin.forwardId);

      // Another phone links the instance; a queued send of its own goes out, and the job, had it been left pending,
      // would have gone before it.
      await loginSandbox(t, NEXT_OWN);
      const fence = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: PEER, body: 'from the next account' },
        { prefer: 'respond-async' },
      );
      assert.equal(fence.status, 202);
      await eventually('the next account sends', async () => {
        const row = await t.services.store.db
          .selectFrom('send_jobs')
          .select('status')
          .where('id', '=', fence.body.data.id)
          .executeTakeFirst();
        return row?.status === 'sent';
      });
      assert.equal(await messageRow(t, id), undefined, 'never relayed');
    });

    it('a synchronous send that would wait its turn is answered as the logout answers, nothing stored', async () => {
      // The account linked now; a pace holds the send in the queue (no relay at once).
      await t.services.store.db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      assert.equal(
        (await t.call('PUT', '/v1/session/pacing', { minIntervalMs: 600_000, jitterMs: 0 })).status,
        200,
      );
      const { content, built, release } = heldContent('waiting across the logout');
      const origin = { forwardId: 'c0ffee00-0000-4000-8000-000000000002' };
      const sending = t.services.app.messaging.send(t.instance, { phone: PEER }, content, origin);
      const answered = settledFlag(sending);
      await built;
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      release();
      await eventually('answered', () => answered(), 5_000);
      await assert.rejects(sending, loggedOutBeforeRelay);
      const jobs = await t.services.store.db
        .selectFrom('send_jobs')
        .select('status')
        .where('instance_id', '=', t.instance.id)
        .execute();
      assert.deepEqual(jobs, []);
      await t.call('PUT', '/v1/session/pacing', {});
    });

    it('a synchronous send the idle queue would relay at once is not relayed from the account linked next', async () => {
      // No pace and an idle queue: the job is stored claimed, to relay at once through the session, which another
      // account linked meanwhile.
      await t.services.store.db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      await loginSandbox(t, OWN);
      const { content, built, release } = heldContent('relayed at once across the logout');
      const origin = { forwardId: 'c0ffee00-0000-4000-8000-000000000003' };
      const sending = t.services.app.messaging.send(t.instance, { phone: PEER }, content, origin);
      const answered = settledFlag(sending);
      await built;
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      await loginSandbox(t, NEXT_OWN);
      release();
      await eventually('answered', () => answered(), 5_000);
      await assert.rejects(sending, loggedOutBeforeRelay);
      const jobs = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['id', 'status'])
        .where('instance_id', '=', t.instance.id)
        .execute();
      assert.deepEqual(jobs, [], 'nothing stored, nothing relayed');
      const sent = await t.services.store.db
        .selectFrom('messages')
        .select('id')
        .where('instance_id', '=', t.instance.id)
        .where('content', 'like', '%relayed at once across the logout%')
        .execute();
      assert.deepEqual(sent, [], 'never relayed from the next account');
    });
  });
}
