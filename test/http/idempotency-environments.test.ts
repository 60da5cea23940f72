import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * docs/decisions/0010-idempotency.md: "Keys are scoped to the organization and the environment of the API key … a
 * test key and a live key of one organization must never see each other's state". The same `Idempotency-Key` with
 * the same request bytes, sent with a test key and then a live key of one organization, runs twice: the live key is
 * never answered with the test instance's answer, and the reverse.
 */
for (const dialect of testDialects()) {
  describe(`idempotent replays across environments [${dialect}]`, () => {
    let t: TestApp;
    let live: string;
    let liveInstance: string;
    before(async () => {
      t = await createTestApp({
        dialect,
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
      live = await t.newKey({ env: 'live' });
      liveInstance = (await t.newInstance('live', 'live-one')).id;
    });
    after(() => t.close());

    async function setHmac(authorization: string, idempotencyKey: string) {
      const raw = await t.app.inject({
        method: 'POST',
        url: '/v1/session/hmac/config',
        headers: {
          authorization: `Bearer ${authorization}`,
          'idempotency-key': idempotencyKey,
          'content-type': 'application/json',
        },
        payload: JSON.stringify({ hmacKey: 'a-shared-hmac-key-0123456789abcdef' }),
      });
      return { status: raw.statusCode, replayed: raw.headers['idempotent-replayed'], body: raw.body };
    }

    async function configured(authorization: string, instance: string): Promise<boolean> {
      const answer = await t.call('GET', `/v1/session/hmac/config?from=${instance}`, undefined, {
        authorization: `Bearer ${authorization}`,
      });
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return answer.body.data.configured;
    }

    it('a live key sending the request a test key made, with its Idempotency-Key, runs it on the live instance', async () => {
      const first = await setHmac(t.key, 'env-shared');
      assert.deepEqual([first.status, first.replayed], [200, undefined]);
      assert.equal(await configured(live, liveInstance), false, 'nothing done on the live instance yet');
      const second = await setHmac(live, 'env-shared');
      assert.deepEqual(
        [second.status, second.replayed],
        [200, undefined],
        'the live key ran its own request',
      );
      assert.equal(await configured(live, liveInstance), true, 'and it reached the live instance');
      // Each environment replays its own answer from now on.
      assert.equal((await setHmac(t.key, 'env-shared')).replayed, 'true');
      assert.equal((await setHmac(live, 'env-shared')).replayed, 'true');
    });

    it('a test key sending the request a live key made first is not answered with it either', async () => {
      const other = await t.newInstance('test', 'second');
      // Two test instances now: the test key must name one, the live key has one only.
      const liveFirst = await setHmac(live, 'live-first');
      assert.deepEqual([liveFirst.status, liveFirst.replayed], [200, undefined]);
      const testAfter = await setHmac(t.key, 'live-first');
      assert.equal(testAfter.replayed, undefined, 'the live answer was replayed to a test key');
      assert.equal(testAfter.status, 400, testAfter.body);
      assert.equal(await configured(t.key, other.id), false);
    });
  });
}
