import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { InstanceDirectory } from '../../src/app/instance-directory.ts';
import { instancesChanged, updateInstance } from '../../src/store/instances.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * docs/decisions/0048-instance-cache.md: an organization's instance list is served from memory for a while; this
 * process's own writes are seen at once, another process's within the lifetime, and a choice that fails on a list
 * from memory is made again on the store's before a 404 or 400.
 */

/** Writes an instance row as another process would: straight to the table, not through this process's store code. */
async function renameElsewhere(t: TestApp, id: string, name: string): Promise<void> {
  await t.services.store.db.updateTable('instances').set({ name }).where('id', '=', id).execute();
}

for (const dialect of testDialects()) {
  describe(`instance lists kept in memory (docs/decisions/0048-instance-cache.md) [${dialect}]`, () => {
    let t: TestApp;
    /** Headers of a key with `instances:manage`, for `/v1/instances/{id}`. */
    let manage: Record<string, string>;
    before(async () => {
      // A lifetime no test outlasts, so what is served from memory is decided by the writes alone.
      t = await createTestApp({ dialect, plan: { plan: 'pro' }, env: { INSTANCE_CACHE_MS: '60000' } });
      manage = { authorization: `Bearer ${await t.newKey({ scopes: ['instances:manage'] })}` };
    });
    after(() => t.close());

    it('serves a list from memory until its lifetime ends, and reads the store again after', async () => {
      let now = 0;
      const directory = new InstanceDirectory({ db: t.services.store.db, ttlMs: 500, now: () => now });
      const first = await directory.list(t.org.id, 'test');
      assert.equal(first.cached, false);
      assert.deepEqual(
        first.instances.map((i) => i.id),
        [t.instance.id],
      );

      await renameElsewhere(t, t.instance.id, 'renamed elsewhere');
      now = 499;
      const second = await directory.list(t.org.id, 'test');
      assert.equal(second.cached, true);
      assert.equal(second.instances, first.instances, 'the same list, not read again');
      assert.notEqual(second.instances[0]?.name, 'renamed elsewhere');

      now = 500;
      const third = await directory.list(t.org.id, 'test');
      assert.equal(third.cached, false);
      assert.equal(third.instances[0]?.name, 'renamed elsewhere');
    });

    it("reads the store again after this process's own write, at once", async () => {
      const directory = new InstanceDirectory({ db: t.services.store.db, ttlMs: 60_000, now: () => 0 });
      await directory.list(t.org.id, 'test');
      assert.equal((await directory.list(t.org.id, 'test')).cached, true);

      await updateInstance(t.services.store.db, t.instance.id, { name: 'renamed here' });
      const after = await directory.list(t.org.id, 'test');
      assert.equal(after.cached, false);
      assert.equal(after.instances[0]?.name, 'renamed here');

      instancesChanged();
      assert.equal((await directory.list(t.org.id, 'test')).cached, false);
      assert.equal(
        (await new InstanceDirectory({ db: t.services.store.db, ttlMs: 0 }).list(t.org.id, 'test')).cached,
        false,
      );
    });

    it('a request names an instance another process renamed with its old row, until this process writes', async () => {
      const read = await t.call('GET', `/v1/instances/${t.instance.id}`, undefined, manage);
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const before = read.body.data.name;

      await renameElsewhere(t, t.instance.id, 'another process');
      assert.equal(
        (await t.call('GET', `/v1/instances/${t.instance.id}`, undefined, manage)).body.data.name,
        before,
      );

      const renamed = await t.call(
        'PATCH',
        `/v1/instances/${t.instance.id}`,
        { name: 'through the API' },
        manage,
      );
      assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
      assert.equal(
        (await t.call('GET', `/v1/instances/${t.instance.id}`, undefined, manage)).body.data.name,
        'through the API',
      );
    });

    it('finds an instance another process created since the list was read, by id in the query and in the path', async () => {
      assert.equal((await t.call('GET', '/v1/session/status')).body.data.instanceId, t.instance.id);

      const id = randomUUID();
      await t.services.store.db
        .insertInto('instances')
        .values({
          id,
          org_id: t.org.id,
          env: 'test',
          name: 'made elsewhere',
          phone: null,
          jid: null,
          push_name: null,
          webhook_url: null,
          subscribe: null,
          hmac_key: null,
          desired_state: 'disconnected',
          last_connected_at: null,
          created_at: Date.now(),
        })
        .execute();

      const byId = await t.call('GET', `/v1/session/status?from=${id}`);
      assert.equal(byId.status, 200, JSON.stringify(byId.body));
      assert.equal(byId.body.data.instanceId, id);
      const byPath = await t.call('GET', `/v1/instances/${id}`, undefined, manage);
      assert.equal(byPath.status, 200, JSON.stringify(byPath.body));
      assert.equal(byPath.body.data.name, 'made elsewhere');

      const unknown = randomUUID();
      assert.deepEqual((await t.call('GET', `/v1/session/status?from=${unknown}`)).body, {
        error: { code: 404, message: 'instance not found' },
      });
    });

    it('a login through this process moves the default at once', async () => {
      await loginSandbox(t, '5511999990176', t.instance.id);
      const b = await t.newInstance('test', 'b');
      assert.equal((await t.call('GET', '/v1/session/status')).body.data.instanceId, t.instance.id);
      t.clock.advance(1000);
      await loginSandbox(t, '5511999990177', b.id);
      assert.equal((await t.call('GET', '/v1/session/status')).body.data.instanceId, b.id);
      assert.equal((await t.call('GET', '/v1/session/status?from=5511999990177')).body.data.instanceId, b.id);
    });
  });
}
