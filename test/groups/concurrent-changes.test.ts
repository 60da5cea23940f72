/**
 * Group administration on the sandbox sent concurrently: each change happens exactly once and none is lost.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN, storedBodies } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const ANA = '5511988887777';
const BIA = '5511966665555';
const CAIO = '5511955554444';
const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`concurrent group administration on the sandbox [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('two concurrent adds of different numbers both stay in the group', async () => {
      const created = await t.call('POST', '/v1/groups/create', { name: 'Race', participants: [ANA] });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const g = created.body.data.jid;
      const [a, b] = await Promise.all([
        t.call('POST', '/v1/groups/participants', { groupJid: g, action: 'add', participants: [BIA] }),
        t.call('POST', '/v1/groups/participants', { groupJid: g, action: 'add', participants: [CAIO] }),
      ]);
      assert.equal(a.body.data.participants[0].status, 'added');
      assert.equal(b.body.data.participants[0].status, 'added');
      const info = await t.call('GET', `/v1/groups/info?groupJid=${encodeURIComponent(g)}`);
      const members = info.body.data.participants.map((p: { jid: string }) => p.jid).sort();
      assert.deepEqual(members, [jidOf(OWN), jidOf(ANA), jidOf(BIA), jidOf(CAIO)].sort());
    });

    it('the same add sent twice at once adds once and reports one add event', async () => {
      const created = await t.call('POST', '/v1/groups/create', { name: 'Twice', participants: [ANA] });
      const g = created.body.data.jid;
      const [a, b] = await Promise.all([
        t.call('POST', '/v1/groups/participants', { groupJid: g, action: 'add', participants: [BIA] }),
        t.call('POST', '/v1/groups/participants', { groupJid: g, action: 'add', participants: [BIA] }),
      ]);
      const statuses = [a.body.data.participants[0].status, b.body.data.participants[0].status].sort();
      assert.deepEqual(statuses, ['added', 'already-in-group']);
      const adds = (await storedBodies(t, 'GroupUpdate'))
        .map((body) => body.event)
        .filter((e) => e.groupJid === g || e.jid === g || JSON.stringify(e).includes(g))
        .filter((e) => JSON.stringify(e).includes('add'));
      assert.equal(adds.length, 1, JSON.stringify(adds));
    });

    it('a concurrent rename and promote both take effect', async () => {
      const created = await t.call('POST', '/v1/groups/create', { name: 'Mixed', participants: [ANA] });
      const g = created.body.data.jid;
      const [a, b] = await Promise.all([
        t.call('POST', '/v1/groups/update', { groupJid: g, name: 'Renamed' }),
        t.call('POST', '/v1/groups/participants', { groupJid: g, action: 'promote', participants: [ANA] }),
      ]);
      assert.equal(a.status, 200);
      assert.equal(b.body.data.participants[0].status, 'promoted');
      const info = (await t.call('GET', `/v1/groups/info?groupJid=${encodeURIComponent(g)}`)).body.data;
      assert.equal(info.name, 'Renamed');
      assert.equal(info.participants.find((p: { jid: string }) => p.jid === jidOf(ANA)).isAdmin, true);
    });
  });
}
