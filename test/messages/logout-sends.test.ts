import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LOGGED_OUT_BEFORE_RELAY } from '../../src/sends/logout.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, messageRow, OWN, PEER, pendingSyncJobId, storedBodies } from './support.ts';

/**
 * A logout ends the account's link (docs/decisions/0074-logout-cancels-pending-sends.md): every send the account
 * accepted and had not relayed yet (queued, scheduled, synchronous and waiting its turn) is canceled with it, its
 * `MessageStatus canceled` recorded, a waiting request answered at once, and none goes out from the account linked
 * to the instance next.
 */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const ASYNC = { prefer: 'respond-async' };
/** The number linked to the instance after the logout. */
const NEXT_OWN = '5511999990009';

for (const dialect of testDialects()) {
  describe(`sends of an account that logged out [${dialect}]`, () => {
    let t: TestApp;
    const status = async (id: string) =>
      (
        await t.services.store.db
          .selectFrom('send_jobs')
          .select('status')
          .where('instance_id', '=', t.instance.id)
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      ).status;

    before(async () => {
      t = await appFor(dialect);
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('cancels queued, scheduled and waiting sends; none goes out from the next account', {
      timeout: 60_000,
    }, async () => {
      // A long pace holds every send after the first in the queue.
      assert.equal(
        (await t.call('PUT', '/v1/session/pacing', { minIntervalMs: 600_000, jitterMs: 0 })).status,
        200,
      );
      const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'first' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const queued = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'queued' }, ASYNC);
      assert.equal(queued.status, 202);
      const sendAt = new Date(T0 + 60_000).toISOString();
      const scheduled = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'scheduled', sendAt });
      assert.equal(scheduled.status, 202);
      // A synchronous send waiting its turn behind the pace (the test clock does not move: no deadline ends it).
      const waiting = t.call('POST', '/v1/messages/send', { phone: PEER, body: 'waiting' });
      const waitingId = await eventually('the waiting send stored', () => pendingSyncJobId(t));
      const ids = [queued.body.data.id as string, scheduled.body.data.id as string, waitingId];

      t.clock.advance(1_000);
      const loggedOutAt = new Date(t.clock()).toISOString();
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      const answer = await waiting;
      assert.equal(answer.status, 409);
      assert.deepEqual(answer.body, bad(409, LOGGED_OUT_BEFORE_RELAY));
      for (const id of ids) assert.equal(await status(id), 'canceled', id);
      const canceled = (await storedBodies(t, 'MessageStatus'))
        .filter((body) => body.event.status === 'canceled')
        .map((body) => body.event);
      assert.deepEqual(
        canceled,
        ids.map((id) => ({ id, status: 'canceled', at: loggedOutAt })),
        'one MessageStatus canceled a job, in acceptance order, at the logout',
      );
      assert.equal((await t.call('GET', `/v1/messages/${ids[0]}`)).body.data.status, 'canceled');

      // Another phone links the instance; past the pace and the schedule, a queued send of its own goes out, and the
      // old account's sends, had they been left pending, would have gone before it.
      await loginSandbox(t, NEXT_OWN);
      t.clock.advance(3_600_000);
      const fence = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: PEER, body: 'from the next account' },
        ASYNC,
      );
      assert.equal(fence.status, 202);
      await eventually('the next account sends', async () => (await status(fence.body.data.id)) === 'sent');
      for (const id of ids) {
        assert.equal(await status(id), 'canceled', id);
        assert.equal(await messageRow(t, id), undefined, `${id} never relayed`);
      }
      await t.call('PUT', '/v1/session/pacing', {});
    });
  });
}
