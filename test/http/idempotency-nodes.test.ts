import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { type TestStore, testDialects } from '../support/store.ts';
import { twoNodes } from './idempotency-support.ts';

/**
 * `Idempotency-Key` with several nodes (docs/decisions/0010-idempotency.md): two nodes in this process share one
 * store and forward a request to the node holding the instance's lease (src/http/plugins/forward.ts). The key is
 * claimed once, by the node that received the request; the owner serves the forwarded request without claiming it
 * again.
 */

const SECRET = 'idempotency-cluster-secret-0123456789';

for (const dialect of testDialects()) {
  describe(`Idempotency-Key across two nodes [${dialect}]`, () => {
    let shared: TestStore;
    let a: TestApp;
    let b: TestApp;
    before(async () => {
      ({ shared, a, b } = await twoNodes(dialect, SECRET));
      await loginSandbox(a);
    });
    after(async () => {
      await b?.close();
      await a?.close();
      await shared?.cleanup();
    });

    it('a request forwarded to the owner is claimed once, on the receiving node, and replays on any node', async () => {
      assert.ok(a.services.cluster);
      const route = await a.services.cluster.keeper.route(a.instance);
      // The node that does not hold the instance receives the request and forwards it.
      const [receiving, owner] = route.local ? [b, a] : [a, b];
      assert.ok(receiving.services.cluster);
      assert.equal((await receiving.services.cluster.keeper.route(a.instance)).local, false);
      const send = (node: TestApp) =>
        node.app.inject({
          method: 'POST',
          url: '/v1/messages/send',
          payload: JSON.stringify({ phone: PEER, from: a.instance.id, body: 'once across nodes' }),
          headers: {
            authorization: `Bearer ${a.key}`,
            'content-type': 'application/json',
            'idempotency-key': 'cluster-1',
          },
        });
      const first = await send(receiving);
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(first.headers['idempotent-replayed'], undefined);
      for (const node of [receiving, owner]) {
        const again = await send(node);
        assert.equal(again.statusCode, 200, again.body);
        assert.equal(again.body, first.body);
        assert.equal(again.headers['idempotent-replayed'], 'true');
      }
      const rows = await shared.store.db
        .selectFrom('messages')
        .select('id')
        .where('instance_id', '=', a.instance.id)
        .where('from_me', '=', 1)
        .execute();
      assert.deepEqual(
        rows.map((row) => row.id),
        [JSON.parse(first.body).data.id],
      );
      const keys = await shared.store.db.selectFrom('idempotency_keys').select(['key', 'status']).execute();
      assert.deepEqual(keys, [{ key: 'cluster-1', status: 200 }]);
    });
  });
}
