import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * docs/decisions/0002-instance-resolution.md: the candidates are the key's organization's instances "narrowed by the
 * key's instance allow-list … Nothing outside the candidates is ever consulted"; one outside the allow-list "answers
 * 404 instance not found". Idempotency keys are scoped to the organization and environment
 * (docs/decisions/0010-idempotency.md), and the kept answer is replayed before the instance is resolved, so a key
 * limited to instance B is answered with what was done on instance A, by another key.
 */
for (const dialect of testDialects()) {
  describe(`idempotent replays across instance allow-lists [${dialect}]`, () => {
    let t: TestApp;
    let a: Instance;
    let b: Instance;
    let onlyA: string;
    let onlyB: string;
    before(async () => {
      t = await createTestApp({ dialect, plan: { plan: 'pro' } });
      a = t.instance;
      b = await t.newInstance('test', 'b');
      onlyA = await t.newKey({ instances: [a.id] });
      onlyB = await t.newKey({ instances: [b.id] });
    });
    after(() => t.close());

    it("a key limited to B repeating a request made on A with the same Idempotency-Key is not answered with A's answer", async () => {
      const url = `/v1/session/hmac/config?from=${a.id}`;
      const body = { hmacKey: 'k'.repeat(40) };
      const first = await t.call('POST', url, body, {
        authorization: `Bearer ${onlyA}`,
        'idempotency-key': 'order-1',
      });
      assert.equal(first.status, 200);
      // Without the header the key limited to B cannot reach A at all:
      const plain = await t.call('POST', url, body, { authorization: `Bearer ${onlyB}` });
      assert.deepEqual(plain.body, { error: { code: 404, message: 'instance not found' } });
      const again = await t.call('POST', url, body, {
        authorization: `Bearer ${onlyB}`,
        'idempotency-key': 'order-1',
      });
      assert.equal(
        again.headers['idempotent-replayed'],
        undefined,
        'replayed an answer about an instance the key may not address',
      );
      assert.ok([404, 422].includes(again.status), `an error, not A's answer: ${JSON.stringify(again.body)}`);
    });
  });
}
