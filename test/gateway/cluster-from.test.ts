/**
 * docs/gateway.md: "The header is the only instance selector: a `from` in the query or in a send's body is replaced
 * by it." With two nodes, a gateway request received by the node that does not own the x-instance-id instance is
 * forwarded to the owner as its /v1 twin; the owner must still act on the x-instance-id instance.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import { twoNodes } from '../http/idempotency-support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { type TestStore, testDialects } from '../support/store.ts';

const SECRET = 'gateway-cluster-secret-0123456789abcdef';

/** The node's cluster services (these tests start every app as a node). */
function clusterOf(t: TestApp) {
  assert.ok(t.services.cluster);
  return t.services.cluster;
}

for (const dialect of testDialects()) {
  describe(`gateway x-instance-id across two nodes [${dialect}]`, () => {
    let shared: TestStore;
    let a: TestApp;
    let b: TestApp;
    let other: Instance;
    /** An instance of the org owned by the same node as the main one (found among a few). */
    let sibling: Instance | undefined;
    before(async () => {
      ({ shared, a, b } = await twoNodes(dialect, SECRET));
      await loginSandbox(a);
      other = await a.newInstance('test', 'other');
      await loginSandbox(a, '5511999990003', other.id);
      const mainOwner = (await clusterOf(a).keeper.route(a.instance)).local;
      for (let i = 0; i < 6 && !sibling; i++) {
        const candidate = await a.newInstance('test', `sibling-${i}`);
        await loginSandbox(a, `55119999901${i}0`.slice(0, 13), candidate.id);
        if ((await clusterOf(a).keeper.route(candidate)).local === mainOwner) sibling = candidate;
      }
    });
    after(async () => {
      await b?.close();
      await a?.close();
      await shared?.cleanup();
    });

    it('a forwarded gateway request acts on x-instance-id, not on a query from', async () => {
      const routeA = await clusterOf(a).keeper.route(a.instance);
      const receiving = routeA.local ? b : a;
      assert.equal((await clusterOf(receiving).keeper.route(a.instance)).local, false);
      const answer = await receiving.app.inject({
        method: 'GET',
        url: `/session/status?from=${other.id}`,
        headers: { authorization: `Bearer ${a.key}`, 'x-instance-id': a.instance.id },
      });
      assert.equal(answer.statusCode, 200, answer.body);
      assert.equal(JSON.parse(answer.body).data.instanceId, a.instance.id);
    });

    it('a forwarded gateway send goes out from x-instance-id, not from a body from', async () => {
      assert.ok(sibling, 'an instance owned by the same node as the main one');
      const routeA = await clusterOf(a).keeper.route(a.instance);
      const receiving = routeA.local ? b : a;
      const answer = await receiving.app.inject({
        method: 'POST',
        url: '/chat/send/text',
        payload: JSON.stringify({
          phone: '5511999990002',
          message: 'from the header instance',
          from: sibling.id,
        }),
        headers: {
          authorization: `Bearer ${a.key}`,
          'x-instance-id': a.instance.id,
          'content-type': 'application/json',
        },
      });
      assert.equal(answer.statusCode, 200, answer.body);
      const id = JSON.parse(answer.body).data.id;
      const row = await shared.store.db
        .selectFrom('messages')
        .select(['instance_id'])
        .where('id', '=', id)
        .executeTakeFirst();
      assert.equal(row?.instance_id, a.instance.id, 'sent by the x-instance-id instance');
    });
  });
}
