/**
 * Instance lists kept between turns on a PostgreSQL store (docs/decisions/0088-kept-instance-lists.md), on two
 * nodes' services over one store: what one node, the command line or an operator's SQL changes reaches the other
 * node's requests once the store's trigger has signalled it; a node's own writes reach its next request at once; a
 * node whose signals' connection was cut serves nothing a change could have passed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { signalsApplicationName } from '../../src/store/pg-signals.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { listSignalsHeard } from '../support/list-signals.ts';
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

    /** `a`'s signals (asserted present). */
    const signalsOfA = () => {
      const signals = a.services.signals;
      assert.ok(signals, 'a has store signals');
      return signals;
    };

    /** Every `instances` item `a` hears from now on, until the returned `stop`. */
    function hearOnA(): { items: string[]; stop: () => void } {
      const items: string[] = [];
      const stop = signalsOfA().subscribe('instances', (heard) => items.push(...heard));
      return { items, stop };
    }

    /** Waits until `a` heard every change of an instance list committed so far. */
    const settledOnA = () => listSignalsHeard(ts.store.db, signalsOfA());

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
      await settledOnA();
      assert.equal(await statusOnA(id), 200);
      const heard = hearOnA();
      const deleted = await b.call('DELETE', `/v1/instances/${id}`, undefined, headers);
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
      await settledOnA();
      heard.stop();
      assert.ok(
        heard.items.includes(`${a.org.id}/test`),
        `the delete was signalled: ${heard.items.join(' ')}`,
      );
      assert.equal(await statusOnA(id), 404);
    });

    it("an operator's SQL and the command line's writes are signalled like a node's, a rolled-back one not", async () => {
      const second = await adminCreateInstance(ts.store.db, { org: a.org.id, env: 'test', name: 'cli' });
      assert.equal(await statusOnA(second.id), 200, 'a new instance is read again rather than not found');
      await admin.query(`delete from ${ts.schema}.instances where id = $1`, [second.id]);
      await settledOnA();
      assert.equal(await statusOnA(second.id), 404);
      const third = await adminCreateInstance(ts.store.db, { org: a.org.id, env: 'test', name: 'third' });
      await settledOnA();
      const heard = hearOnA();
      await admin.query('begin');
      await admin.query(`delete from ${ts.schema}.instances where id = $1`, [third.id]);
      await admin.query('rollback');
      await settledOnA();
      assert.deepEqual(
        heard.items.filter((item) => !item.startsWith('marker/')),
        [],
        'a rolled-back change sends nothing',
      );
      assert.equal(await statusOnA(third.id), 200);
      await admin.query(`update ${ts.schema}.instances set name = 'renamed' where id = $1`, [third.id]);
      await settledOnA();
      heard.stop();
      assert.deepEqual(
        heard.items.filter((item) => !item.startsWith('marker/')),
        [`${a.org.id}/test`],
        "an operator's update is",
      );
    });

    it("a node's own writes reach its next request at once, before the store's signal", async () => {
      const hmacKey = 'k'.repeat(32);
      const path = `/v1/session/hmac/config?from=${a.instance.id}`;
      for (let round = 0; round < 10; round++) {
        // Resolved from the kept list: the instance's row says no key.
        assert.equal(
          ((await a.call('GET', path)).body as { data: { configured: boolean } }).data.configured,
          false,
        );
        assert.equal((await a.call('POST', path, { hmacKey })).status, 200);
        const after = await a.call('GET', path);
        assert.equal(
          (after.body as { data: { configured: boolean } }).data.configured,
          true,
          `round ${round}`,
        );
        assert.equal((await a.call('DELETE', path)).status, 200);
      }
    });

    it('a node whose signals connection was cut serves no list a change could have passed', async () => {
      const victim = await adminCreateInstance(ts.store.db, { org: a.org.id, env: 'test', name: 'victim' });
      await settledOnA();
      assert.equal(await statusOnA(victim.id), 200);
      const cut = await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
        [signalsApplicationName(a.services.nodes.id)],
      );
      assert.equal(cut.rowCount, 1);
      await eventually('a knows its signals are down', () => a.services.signals?.listening === false);
      // Deleted while a's listening session is gone: its signal never reaches a. Whether a answers before or after
      // listening again (whose gap drops every list), nothing kept from before is used.
      await admin.query(`delete from ${ts.schema}.instances where id = $1`, [victim.id]);
      assert.equal(await statusOnA(victim.id), 404);
      await eventually('a listens again', () => a.services.signals?.listening === true);
      assert.equal(await statusOnA(victim.id), 404);
    });

    // Last: it empties the table.
    it("a TRUNCATE of the table, which fires no row trigger, drops every node's lists", async () => {
      await settledOnA();
      assert.equal(await statusOnA(a.instance.id), 200);
      const heard = hearOnA();
      await admin.query(`truncate ${ts.schema}.instances cascade`);
      await settledOnA();
      heard.stop();
      assert.ok(heard.items.includes('*'), `every list: ${heard.items.join(' ')}`);
      assert.equal(await statusOnA(a.instance.id), 404);
    });
  });
}
