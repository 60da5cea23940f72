import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError, errors } from '../../src/domain/errors.ts';
import type { Instance } from '../../src/domain/instance.ts';
import { LOGGED_OUT_BEFORE_RELAY } from '../../src/sends/logout.ts';
import type { NewSendJob } from '../../src/store/send-jobs.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, OWN, PEER } from './support.ts';

/**
 * A send whose account logs out, or whose instance another account links, after the acceptance's last look at the
 * session and before its job's insert (docs/decisions/0074-logout-cancels-pending-sends.md): the insert is
 * conditional on the instance's account generation (`instances.account_generation`, which a recorded logout moves
 * in the transaction of its cancel), so the job is not stored, and the send answers as a logout during its
 * acceptance does: `409 not logged in` queued, `409 LOGGED_OUT_BEFORE_RELAY` synchronous. Before, the job was stored
 * after the logout's cancel: a queued one `pending` until the acceptance canceled it (a drain of the account linked
 * since could claim it first), a synchronous one stored claimed and relayed at once from the account linked since.
 * In a group insert (src/sends/group-insert.ts) only the jobs of the instance whose account changed are refused.
 * The interleaving is forced by a wrapper of the queue's store (the last step before the group insert). Runs on
 * SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
/** The number linked to the instance after the logout. */
const NEXT_OWN = '5511999990009';
/** The number of the second instance of the group insert's case. */
const OTHER_OWN = '5511999990008';

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

/**
 * Runs `change` once, at the next store of a job by the send queue, after every check of the acceptance and before
 * the job's insert; the queue's own store runs after it, and for every later job.
 */
function atNextInsert(t: TestApp, change: () => Promise<void>): void {
  const queue = t.services.sendQueue;
  const store = queue.store.bind(queue);
  queue.store = async (job, late) => {
    delete (queue as { store?: unknown }).store;
    await change();
    return store(job, late);
  };
}

/** The instance's send jobs' statuses. */
async function jobStatuses(t: TestApp, instanceId = t.instance.id): Promise<string[]> {
  const rows = await t.services.store.db
    .selectFrom('send_jobs')
    .select('status')
    .where('instance_id', '=', instanceId)
    .execute();
  return rows.map((row) => row.status);
}

/** Messages stored whose content holds `text`. */
async function messagesWith(t: TestApp, text: string): Promise<unknown[]> {
  return t.services.store.db
    .selectFrom('messages')
    .select('id')
    .where('content', 'like', `%${text}%`)
    .execute();
}

/** Links the instance to {@link OWN}, logging out the account linked before, if any; no send job left. */
async function linkOwn(t: TestApp): Promise<void> {
  await t.services.store.db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
  if (t.services.sessions.existing(t.instance.id)?.state().loggedIn === true)
    assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
  await loginSandbox(t, OWN);
}

const text = (body: string) => () => ({ kind: 'text' as const, text: body, linkPreview: false });

for (const dialect of testDialects()) {
  describe(`a send whose account changes between its acceptance's check and its insert [${dialect}]`, () => {
    let t: TestApp;

    before(async () => {
      t = await appFor(dialect);
      t.clock.set(T0);
    });
    after(() => t.close());

    it('a queued send is answered 409 with nothing stored when another account linked', async () => {
      await linkOwn(t);
      atNextInsert(t, async () => {
        assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
        await loginSandbox(t, NEXT_OWN);
      });
      const accepting = t.services.app.messaging.enqueue(
        t.instance,
        { phone: PEER },
        text('queued across the next login'),
        null,
      );
      await assert.rejects(accepting, notLoggedIn);
      assert.deepEqual(await jobStatuses(t), [], 'nothing stored for the account linked since to relay');
    });

    it('a queued send is answered 409 with nothing stored when the account logged out', async () => {
      await linkOwn(t);
      atNextInsert(t, async () => {
        assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      });
      const accepting = t.services.app.messaging.enqueue(
        t.instance,
        { phone: PEER },
        text('queued across the logout'),
        null,
      );
      await assert.rejects(accepting, notLoggedIn);
      assert.deepEqual(await jobStatuses(t), []);
    });

    it('a synchronous send the idle queue would relay at once is refused, nothing stored or relayed', async () => {
      await linkOwn(t);
      atNextInsert(t, async () => {
        assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
        await loginSandbox(t, NEXT_OWN);
      });
      const sending = t.services.app.messaging.send(
        t.instance,
        { phone: PEER },
        text('relayed at once across the next login'),
      );
      await assert.rejects(sending, loggedOutBeforeRelay);
      assert.deepEqual(await jobStatuses(t), []);
      assert.deepEqual(
        await messagesWith(t, 'relayed at once across the next login'),
        [],
        'never relayed from the account linked since',
      );
    });

    it('over HTTP: a queued send answers 409 not logged in, a synchronous one 409 canceled before its relay', async () => {
      await linkOwn(t);
      atNextInsert(t, async () => {
        assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
        await loginSandbox(t, NEXT_OWN);
      });
      const queued = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: PEER, body: 'queued over http' },
        { prefer: 'respond-async' },
      );
      assert.equal(queued.status, 409);
      assert.deepEqual(queued.body, { error: { code: 409, message: errors.notLoggedIn().message } });
      await linkOwn(t);
      atNextInsert(t, async () => {
        assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
        await loginSandbox(t, NEXT_OWN);
      });
      const sync = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'sync over http' });
      assert.equal(sync.status, 409);
      assert.deepEqual(sync.body, { error: { code: 409, message: LOGGED_OUT_BEFORE_RELAY } });
      assert.deepEqual(await jobStatuses(t), []);
    });

    it("in one group insert, one instance's account change refuses its job only", async () => {
      await linkOwn(t);
      const other: Instance = await t.newInstance('test', 'other');
      await loginSandbox(t, OTHER_OWN, other.id);
      // Both jobs reach the queue's store, then go to the group insert in the same turn, after the first instance's
      // logout.
      const queue = t.services.sendQueue;
      const store = queue.store.bind(queue);
      const held: { job: NewSendJob; resolve: (stored: ReturnType<typeof store>) => void }[] = [];
      let both: () => void = () => undefined;
      const arrived = new Promise<void>((resolve) => {
        both = resolve;
      });
      queue.store = (job, late) =>
        new Promise((resolve) => {
          held.push({ job, resolve: (stored) => resolve(stored) });
          if (held.length === 2) both();
          void late;
        });
      const first = t.services.app.messaging.enqueue(
        t.instance,
        { phone: PEER },
        text('first instance'),
        null,
      );
      const second = t.services.app.messaging.enqueue(other, { phone: PEER }, text('second instance'), null);
      await arrived;
      delete (queue as { store?: unknown }).store;
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      for (const { job, resolve } of held) resolve(store(job));
      await assert.rejects(first, notLoggedIn);
      const accepted = await second;
      assert.equal(accepted.status, 'pending');
      assert.deepEqual(await jobStatuses(t), []);
      const others = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['id', 'status'])
        .where('instance_id', '=', other.id)
        .execute();
      assert.deepEqual(
        others.map((row) => row.id),
        [accepted.id],
      );
    });
  });
}
