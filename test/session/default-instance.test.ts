import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

// docs/decisions/0002-instance-resolution.md: the latest successful connect — one that starts pairing as well as one
// that resumes a stored session — makes its instance the one that requests without `from` address.
for (const dialect of testDialects()) {
  describe(`a connect makes its instance the default one (docs/decisions/0002-instance-resolution.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      // Three or more test instances: the pro plan (free allows 2, docs/decisions/0029-instances-over-the-api.md).
      t = await createTestApp({ dialect, plan: { plan: 'pro' } });
    });
    after(() => t.close());

    it('after connect?from=B starts pairing, scan and status without from address B', async () => {
      await loginSandbox(t, '5511999990101', t.instance.id);
      const b = await t.newInstance('test', 'b');
      t.clock.advance(1000);

      const connect = await t.call('POST', `/v1/session/connect?from=${b.id}`);
      assert.equal(connect.status, 200);
      assert.equal(connect.body.data.jid, '', 'pairing started, not logged in');

      assert.deepEqual((await t.call('GET', '/v1/session/status')).body, {
        success: true,
        code: 200,
        data: { connected: true, loggedIn: false, instanceId: b.id, env: 'test' },
      });
      const qr = await t.call('GET', '/v1/session/qr');
      assert.equal(qr.status, 200, JSON.stringify(qr.body));

      const scan = await t.call('POST', '/v1/sandbox/scan', { phone: '5511999990102' });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      const status = (await t.call('GET', '/v1/session/status')).body.data;
      assert.equal(status.instanceId, b.id);
      assert.equal(status.loggedIn, true);
      assert.equal(status.jid, '5511999990102.0:1@s.whatsapp.net');

      const rows = await t.services.store.db
        .selectFrom('instances')
        .select(['id', 'last_connected_at'])
        .where('id', 'in', [t.instance.id, b.id])
        .execute();
      const at = new Map(rows.map((r) => [r.id, r.last_connected_at ?? '']));
      assert.ok((at.get(b.id) ?? '') > (at.get(t.instance.id) ?? ''), JSON.stringify(rows));
    });

    it('a connect that resumes a stored session moves the default back', async () => {
      t.clock.advance(1000);
      assert.equal((await t.call('POST', `/v1/session/disconnect?from=${t.instance.id}`)).status, 200);
      t.clock.advance(1000);
      const resume = await t.call('POST', `/v1/session/connect?from=${t.instance.id}`);
      assert.equal(resume.status, 200);
      const status = (await t.call('GET', '/v1/session/status')).body.data;
      assert.equal(status.instanceId, t.instance.id);
      assert.equal(status.jid, '5511999990101.0:1@s.whatsapp.net');
    });

    it('a refused connect does not move the default', async () => {
      const c = await t.newInstance('test', 'c');
      t.clock.advance(1000);
      const refused = await t.call('POST', `/v1/session/connect?from=${c.id}`, { subscribe: ['Nope'] });
      assert.equal(refused.status, 400);
      assert.equal((await t.call('GET', '/v1/session/status')).body.data.instanceId, t.instance.id);
    });
  });
}
