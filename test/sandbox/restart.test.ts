import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { appFor, OWN, PEER } from '../messages/support.ts';
import { loginSandbox } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`sandbox world persistence (docs/decisions/0004-sandbox.md) [${dialect}]`, () => {
    it('keeps defined users, groups and the id sequence across a restart and a logout', async () => {
      const first = await appFor(dialect);
      const { testStore, clock, key, instance } = first;
      const headers = { authorization: `Bearer ${key}` };
      let stopped = false;
      try {
        await loginSandbox(first, OWN);
        await first.call('POST', '/v1/sandbox/users', { phone: '5511999970001', registered: false });
        await first.call('POST', '/v1/sandbox/users', {
          phone: '5511999970000',
          registered: true,
          pushName: 'Zed',
        });
        const foreign = (
          await first.call('POST', '/v1/sandbox/groups', {
            name: 'Theirs',
            ownerPhone: PEER,
            participants: [],
          })
        ).body.data;
        const session = first.services.sessions.existing(instance.id);
        const own = await session?.createGroup('Mine', [jidOf(PEER)]);
        assert.ok(own);
        const before = (await first.call('POST', '/v1/messages/send', { phone: PEER, body: 'before' })).body
          .data.id;
        await first.app.close();
        await first.services.webhooks.stop(1000);
        await first.services.sessions.closeAll();
        first.services.keys.stop();
        stopped = true;

        const second = await appFor(dialect, { testStore, clock });
        try {
          const connect = await second.call('POST', `/v1/session/connect?from=${instance.id}`, {}, headers);
          assert.equal(
            connect.body.data.jid,
            `${OWN}.0:1@s.whatsapp.net`,
            'logged in from stored credentials',
          );
          const restored = second.services.sessions.existing(instance.id);
          assert.ok(restored);
          assert.deepEqual(
            (await restored.checkPhones(['5511999970001', '5511999970000'])).map((c) => c.isInPlatform),
            [false, true],
          );
          assert.deepEqual(
            (await restored.contacts()).map((c) => [c.jid, c.pushName]),
            [[jidOf('5511999970000'), 'Zed']],
          );
          const groups = (await restored.listGroups()).map((g) => g.jid).sort();
          assert.deepEqual(groups, [foreign.jid, own.jid].sort());
          assert.equal((await restored.groupInfo(own.jid)).name, 'Mine');

          const after = await second.call(
            'POST',
            '/v1/messages/send',
            { phone: PEER, body: 'after', from: instance.id },
            headers,
          );
          assert.equal(after.status, 200, 'the id sequence continues: no clash with ids sent before');
          assert.notEqual(after.body.data.id, before);
          const receipt = await second.call(
            'POST',
            `/v1/sandbox/receipt?from=${instance.id}`,
            { id: before, state: 'read' },
            headers,
          );
          assert.equal(receipt.status, 200, 'a message sent before the restart is found in the store');

          await second.call('POST', `/v1/session/logout?from=${instance.id}`, {}, headers);
          await loginSandbox(
            { ...second, call: (m, u, b) => second.call(m, u, b, headers) },
            OWN,
            instance.id,
          );
          const again = second.services.sessions.existing(instance.id);
          assert.deepEqual(
            ((await again?.listGroups()) ?? []).map((g) => g.jid).sort(),
            groups,
            'logout keeps the world',
          );
        } finally {
          await second.close();
        }
      } finally {
        if (!stopped) await first.close();
        await testStore.cleanup();
      }
    });

    it('answers 503 with Retry-After while a session that should be connected is not in the process, and keeps none', async () => {
      const ctx = await appFor(dialect);
      try {
        await loginSandbox(ctx, OWN);
        // What a node sees between a hand-over and the session's restore: connected and logged in, no session here.
        await ctx.services.sessions.release(ctx.instance.id);
        const inbound = await ctx.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'early' });
        assert.equal(inbound.status, 503);
        assert.equal(inbound.headers['retry-after'], '2');
        assert.deepEqual(inbound.body, {
          error: { code: 503, message: 'not connected to the platform right now' },
        });
        assert.equal(ctx.services.sessions.existing(ctx.instance.id), undefined, 'no idle session kept');
        await (await ctx.services.sessions.session(ctx.instance)).connect();
        const again = await ctx.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'restored' });
        assert.equal(again.status, 200);
      } finally {
        await ctx.close();
        await ctx.testStore.cleanup();
      }
    });
  });
}
