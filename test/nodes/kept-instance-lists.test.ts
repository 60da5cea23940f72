/**
 * Instance lists kept between turns on a PostgreSQL store (docs/decisions/0088-kept-instance-lists.md), on two
 * nodes' services over one store: what one node, the command line or an operator's SQL changes reaches the other
 * node's requests once the store's trigger has signalled it, and never later; a node whose signals' connection was
 * cut keeps nothing it could have missed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { signalsApplicationName } from '../../src/store/pg-signals.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`kept instance lists across nodes (${dialect})`, () => {
    let ts: TestStore;
    let a: TestApp;
    let b: TestApp;
    let admin: pg.Client;

    before(async () => {
      ts = await createTestStore(dialect);
      a = await createTestApp({
        testStore: ts,
        plan: { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 },
      });
      b = await createTestApp({ testStore: ts });
      admin = new pg.Client({ connectionString: (ts.database as { url: string }).url });
      await admin.connect();
    });

    after(async () => {
      await admin.end();
      await b.close();
      await a.close();
      await ts.cleanup();
    });

    /** Resolves once `app`'s signals heard a change of an instance list (its kept list is dropped by then). */
    function nextListSignal(app: TestApp): Promise<string[]> {
      const signals = app.services.signals;
      assert.ok(signals, 'the node has store signals');
      return new Promise((resolve) => {
        const stop = signals.subscribe('instances', (items) => {
          stop();
          resolve([...items]);
        });
      });
    }

    /** `a`'s answer to a status request addressing `instanceId`. */
    const statusOnA = async (instanceId: string) =>
      (await a.call('GET', `/v1/session/status?from=${instanceId}`)).status;

    it("an instance another node deletes is not found on this node once the store's signal is heard", async () => {
      assert.ok(a.services.signals?.listening && b.services.signals?.listening, 'both nodes listen');
      // A key of a's organization that may manage instances, used on both nodes (b's own key is of its own org).
      const key = await a.newKey({ scopes: ['instances:manage', 'chat:*'] });
      const headers = { authorization: `Bearer ${key}` };
      const created = await a.call('POST', '/v1/instances', { name: 'second' }, headers);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = (created.body as { data: { id: string } }).data.id;
      assert.equal(await statusOnA(id), 200);
      assert.equal(await statusOnA(id), 200, 'served from the kept list');
      const signal = nextListSignal(a);
      const deleted = await b.call('DELETE', `/v1/instances/${id}`, undefined, headers);
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
      assert.deepEqual(await signal, [`${a.org.id}/test`]);
      assert.equal(await statusOnA(id), 404);
    });

    it("an operator's SQL and the command line's writes are heard like a node's", async () => {
      const second = await adminCreateInstance(ts.store.db, { org: a.org.id, env: 'test', name: 'cli' });
      assert.equal(await statusOnA(second.id), 200, 'a new instance is read again rather than not found');
      assert.equal(await statusOnA(second.id), 200);
      const signal = nextListSignal(a);
      await admin.query(`delete from ${ts.schema}.instances where id = $1`, [second.id]);
      assert.deepEqual(await signal, [`${a.org.id}/test`]);
      assert.equal(await statusOnA(second.id), 404);
      // A change rolled back is never signalled: the next signal heard is the one of the later commit.
      const third = await adminCreateInstance(ts.store.db, { org: a.org.id, env: 'test', name: 'third' });
      assert.equal(await statusOnA(third.id), 200);
      const next = nextListSignal(a);
      await admin.query('begin');
      await admin.query(`delete from ${ts.schema}.instances where id = $1`, [third.id]);
      await admin.query('rollback');
      assert.equal(await statusOnA(third.id), 200);
      await admin.query(`update ${ts.schema}.instances set name = 'renamed' where id = $1`, [third.id]);
      assert.deepEqual(await next, [`${a.org.id}/test`]);
      assert.equal(await statusOnA(third.id), 200);
    });

    it('a node whose signals connection was cut serves no list a change could have passed', async () => {
      const victim = await adminCreateInstance(ts.store.db, { org: a.org.id, env: 'test', name: 'victim' });
      assert.equal(await statusOnA(victim.id), 200);
      assert.equal(await statusOnA(victim.id), 200, 'kept');
      const cut = await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
        [signalsApplicationName(a.services.nodes.id)],
      );
      assert.equal(cut.rowCount, 1);
      await eventually('a knows its signals are down', () => a.services.signals?.listening === false);
      // Deleted while a's listening session is gone: its signal never reaches a.
      await admin.query(`delete from ${ts.schema}.instances where id = $1`, [victim.id]);
      assert.equal(await statusOnA(victim.id), 404, 'nothing kept is used while not listening');
      const kept = await adminCreateInstance(ts.store.db, { org: a.org.id, env: 'test', name: 'kept' });
      assert.equal(await statusOnA(kept.id), 200);
      await eventually('a listens again', () => a.services.signals?.listening === true);
      await admin.query(`delete from ${ts.schema}.instances where id = $1`, [kept.id]);
      // Whether its signal came in before or after a listened again, the list read while down was not kept.
      assert.equal(await statusOnA(kept.id), 404);
      assert.equal(await statusOnA(victim.id), 404);
    });
  });
}
