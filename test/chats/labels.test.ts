/**
 * Business labels on the sandbox (docs/api.md#labels, docs/decisions/0045-business-labels.md): status codes, exact
 * bodies, 400s naming the field, 404 naming an unknown label, 409 for an account that is not a business account, the
 * scope, the labels the simulated platform keeps for the account after each change and the rows parley stores.
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { nextLabelId } from '../../src/app/labels.ts';
import type { SandboxLabelsState } from '../../src/engines/sandbox/labels.ts';
import { sandboxLidOf } from '../../src/engines/sandbox/lids.ts';
import { appFor } from '../messages/support.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const OWN = '5511999990045';
const ANA = '5511988887777';
const ANA_JID = `${ANA}@s.whatsapp.net`;
const GROUP = '120363025246125486@g.us';

const bad = (status: number, message: string) => ({ error: { code: status, message } });
const okBody = (data: unknown) => ({ success: true, code: 200, data });
const NOT_BUSINESS = 'this account is not a WhatsApp Business account: labels are a business feature';

/** The account's labels as the sandbox keeps them. */
async function platformState(t: TestApp): Promise<SandboxLabelsState> {
  const session = t.services.sessions.ready(t.instance) as unknown as {
    labelsState(): Promise<SandboxLabelsState>;
  };
  return session.labelsState();
}

describe('nextLabelId', () => {
  it('the next label id is computed exactly past 2^53', () => {
    const label = (id: string) => ({ id, name: id, color: 0, predefinedId: null });
    assert.equal(nextLabelId([]), '1');
    assert.equal(nextLabelId([label('9'), label('10')]), '11');
    assert.equal(nextLabelId([label('12345678901234567890'), label('3')]), '12345678901234567891');
    assert.equal(nextLabelId([label('9007199254740993')]), '9007199254740994');
    assert.throws(() => nextLabelId([label('99999999999999999999')]), /no label id is left/);
  });
});

for (const dialect of testDialects()) {
  describe(`business labels (docs/api.md#labels) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    const stored = () =>
      t.services.store.db
        .selectFrom('chat_labels')
        .select(['chat', 'label_id'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('chat')
        .orderBy('label_id')
        .execute();

    it('reads answer what parley has seen (nothing yet) before login; changes answer 409', async () => {
      assert.deepEqual((await t.call('GET', '/v1/labels')).body, okBody({ labels: [] }));
      assert.deepEqual(
        (await t.call('GET', `/v1/chats/${ANA}/labels`)).body,
        okBody({ chat: ANA_JID, labels: [] }),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/labels', { name: 'VIP' })).body,
        bad(409, 'instance is not logged in'),
      );
    });

    it('a personal account is refused 409 naming the reason; nothing is stored', async () => {
      await loginSandbox(t, OWN);
      for (const [method, url, body] of [
        ['POST', '/v1/labels', { name: 'VIP' }],
        ['PATCH', '/v1/labels/1', { name: 'VIP' }],
        ['DELETE', '/v1/labels/1', undefined],
        ['POST', `/v1/chats/${ANA}/labels`, { labelIds: ['1'] }],
        ['PUT', `/v1/chats/${ANA}/labels`, { labelIds: [] }],
        ['DELETE', `/v1/chats/${ANA}/labels/1`, undefined],
      ] as const) {
        const res = await t.call(method, url, body);
        assert.equal(res.status, 409, `${method} ${url}`);
        assert.deepEqual(res.body, bad(409, NOT_BUSINESS), `${method} ${url}`);
      }
      assert.deepEqual(await platformState(t), { labels: {}, chats: {} });
    });

    it('create: 201 with the label, numbered after the highest; the platform and GET /v1/labels hold it', async () => {
      const defined = await t.call('POST', '/v1/sandbox/users', { phone: OWN, verifiedName: 'Acme Shop' });
      assert.equal(defined.status, 200, JSON.stringify(defined.body));
      const first = await t.call('POST', '/v1/labels', { name: '  New customer ', color: 1 });
      assert.equal(first.status, 201);
      assert.deepEqual(first.body, {
        success: true,
        code: 201,
        data: { id: '1', name: 'New customer', color: 1, predefinedId: null },
      });
      const second = await t.call('POST', '/v1/labels', { name: 'Paid' });
      assert.deepEqual(second.body.data, { id: '2', name: 'Paid', color: 0, predefinedId: null });
      assert.deepEqual(
        (await t.call('GET', '/v1/labels')).body,
        okBody({
          labels: [
            { id: '1', name: 'New customer', color: 1, predefinedId: null },
            { id: '2', name: 'Paid', color: 0, predefinedId: null },
          ],
        }),
      );
      assert.deepEqual((await platformState(t)).labels, {
        1: { id: '1', name: 'New customer', color: 1, predefinedId: null },
        2: { id: '2', name: 'Paid', color: 0, predefinedId: null },
      });
    });

    it('400s name the field; 409 for a name taken (ignoring case); 404 names an unknown label', async () => {
      const cases: [string, string, unknown, number, string][] = [
        ['POST', '/v1/labels', {}, 400, 'name is required'],
        ['POST', '/v1/labels', { name: '   ' }, 400, 'name must not be blank'],
        ['POST', '/v1/labels', { name: 'X', color: 20 }, 400, 'color must be <= 19'],
        ['POST', '/v1/labels', { name: 'X', color: 1.5 }, 400, 'color must be an integer'],
        ['POST', '/v1/labels', { name: 'paid' }, 409, 'a label named "Paid" exists already (id 2)'],
        ['PATCH', '/v1/labels/2', {}, 400, 'give name or color to change'],
        ['PATCH', '/v1/labels/abc', { color: 2 }, 400, 'id must be a label id (1 to 20 digits, e.g. "1")'],
        [
          'DELETE',
          `/v1/chats/${ANA}/labels/x`,
          undefined,
          400,
          'labelId must be a label id (1 to 20 digits, e.g. "1")',
        ],
        ['PATCH', '/v1/labels/1', { name: 'PAID' }, 409, 'a label named "Paid" exists already (id 2)'],
        ['PATCH', '/v1/labels/9', { color: 2 }, 404, 'label 9 not found'],
        ['DELETE', '/v1/labels/9', undefined, 404, 'label 9 not found'],
        ['POST', `/v1/chats/${ANA}/labels`, {}, 400, 'labelIds is required'],
        [
          'POST',
          `/v1/chats/${ANA}/labels`,
          { labelIds: ['x1'] },
          400,
          'labelIds must hold label ids (1 to 20 digits, e.g. "1")',
        ],
        [
          'POST',
          `/v1/chats/${ANA}/labels`,
          { labelIds: ['1', '1'] },
          400,
          'labelIds must not repeat a label id',
        ],
        ['POST', `/v1/chats/${ANA}/labels`, { labelIds: ['1', '7'] }, 404, 'label 7 not found'],
        ['PUT', `/v1/chats/${ANA}/labels`, { labelIds: ['8'] }, 404, 'label 8 not found'],
        ['DELETE', `/v1/chats/${ANA}/labels/7`, undefined, 404, 'label 7 not found'],
        [
          'POST',
          '/v1/chats/not-a-chat/labels',
          { labelIds: ['1'] },
          400,
          'jid must be a phone number (digits only, international format), a user JID (<phone>@s.whatsapp.net), a group JID (<id>@g.us) or a LID (<digits>@lid)',
        ],
      ];
      const wrong: string[] = [];
      for (const [method, url, body, status, message] of cases) {
        const res = await t.call(method as 'POST', url, body);
        if (JSON.stringify(res.body) !== JSON.stringify(bad(status, message)))
          wrong.push(`${method} ${url} ${JSON.stringify(body)} → ${JSON.stringify(res.body)}`);
      }
      assert.deepEqual(wrong, []);
      assert.deepEqual(await platformState(t), {
        labels: {
          1: { id: '1', name: 'New customer', color: 1, predefinedId: null },
          2: { id: '2', name: 'Paid', color: 0, predefinedId: null },
        },
        chats: {},
      });
    });

    it('label chats: POST adds, PUT sets, DELETE takes one off; answers, platform and rows after each', async () => {
      const chat = (labels: string[]) =>
        labels.map((id) =>
          id === '1'
            ? { id: '1', name: 'New customer', color: 1, predefinedId: null }
            : { id: '2', name: 'Paid', color: 0, predefinedId: null },
        );
      const added = await t.call('POST', `/v1/chats/${ANA}/labels`, { labelIds: ['2'] });
      assert.deepEqual(added.body, okBody({ chat: ANA_JID, labels: chat(['2']) }));
      const more = await t.call('POST', `/v1/chats/${ANA_JID}/labels`, { labelIds: ['1', '2'] });
      assert.deepEqual(more.body, okBody({ chat: ANA_JID, labels: chat(['1', '2']) }));
      const group = await t.call('PUT', `/v1/chats/${GROUP}/labels`, { labelIds: ['1'] });
      assert.deepEqual(group.body, okBody({ chat: GROUP, labels: chat(['1']) }));
      assert.deepEqual((await platformState(t)).chats, { [ANA_JID]: ['1', '2'], [GROUP]: ['1'] });
      assert.deepEqual(await stored(), [
        { chat: GROUP, label_id: '1' },
        { chat: ANA_JID, label_id: '1' },
        { chat: ANA_JID, label_id: '2' },
      ]);
      const set = await t.call('PUT', `/v1/chats/${ANA}/labels`, { labelIds: ['1'] });
      assert.deepEqual(set.body, okBody({ chat: ANA_JID, labels: chat(['1']) }));
      const removed = await t.call('DELETE', `/v1/chats/${ANA}/labels/1`);
      assert.deepEqual(removed.body, okBody({ chat: ANA_JID, labels: [] }));
      const again = await t.call('DELETE', `/v1/chats/${ANA}/labels/1`);
      assert.deepEqual(again.body, okBody({ chat: ANA_JID, labels: [] }), 'idempotent');
      assert.deepEqual(
        (await t.call('GET', `/v1/chats/${GROUP}/labels`)).body,
        okBody({ chat: GROUP, labels: chat(['1']) }),
      );
      assert.deepEqual((await platformState(t)).chats, { [GROUP]: ['1'] });
      const cleared = await t.call('PUT', `/v1/chats/${GROUP}/labels`, { labelIds: [] });
      assert.deepEqual(cleared.body, okBody({ chat: GROUP, labels: [] }));
      assert.deepEqual(await stored(), []);
    });

    it('rename, recolour, delete: the label comes off every chat; the next new label takes the next number', async () => {
      await t.call('POST', `/v1/chats/${ANA}/labels`, { labelIds: ['1', '2'] });
      const renamed = await t.call('PATCH', '/v1/labels/2', { name: 'Paid in full', color: 5 });
      assert.deepEqual(renamed.body, okBody({ id: '2', name: 'Paid in full', color: 5, predefinedId: null }));
      const recoloured = await t.call('PATCH', '/v1/labels/2', { color: 6 });
      assert.deepEqual(recoloured.body.data, { id: '2', name: 'Paid in full', color: 6, predefinedId: null });
      const deleted = await t.call('DELETE', '/v1/labels/1');
      assert.deepEqual(deleted.body, okBody({ id: '1', name: 'New customer', color: 1, predefinedId: null }));
      assert.deepEqual(
        (await t.call('GET', `/v1/chats/${ANA}/labels`)).body,
        okBody({ chat: ANA_JID, labels: [{ id: '2', name: 'Paid in full', color: 6, predefinedId: null }] }),
      );
      assert.deepEqual(await platformState(t), {
        labels: { 2: { id: '2', name: 'Paid in full', color: 6, predefinedId: null } },
        chats: { [ANA_JID]: ['2'] },
      });
      const next = await t.call('POST', '/v1/labels', { name: 'New customer' });
      assert.deepEqual(next.body.data, { id: '3', name: 'New customer', color: 0, predefinedId: null });
    });

    it('concurrent changes run one at a time: distinct ids, every label stored, a name taken only once', async () => {
      const names = ['C1', 'C2', 'C3', 'C4', 'C5', 'C6'];
      const created = await Promise.all(names.map((name) => t.call('POST', '/v1/labels', { name })));
      assert.deepEqual(
        created.map((r) => r.status),
        names.map(() => 201),
      );
      const ids = created.map((r) => (r.body.data as { id: string }).id);
      assert.deepEqual([...new Set(ids)].sort(), ['4', '5', '6', '7', '8', '9']);
      const listed = (await t.call('GET', '/v1/labels')).body.data.labels as { id: string; name: string }[];
      assert.deepEqual(
        listed.filter((l) => l.name.startsWith('C')).map((l) => `${l.id}:${l.name}`),
        names
          .map((name, i) => `${ids[i]}:${name}`)
          .sort((a, b) => Number(a.split(':')[0]) - Number(b.split(':')[0])),
      );
      assert.deepEqual(Object.keys((await platformState(t)).labels).sort(), ['2', '3', ...ids].sort());
      const twice = await Promise.all([1, 2].map(() => t.call('POST', '/v1/labels', { name: 'Once' })));
      assert.deepEqual(twice.map((r) => r.status).sort(), [201, 409]);
      assert.equal(
        listed.length + 1,
        ((await t.call('GET', '/v1/labels')).body.data.labels as unknown[]).length,
      );
    });

    it('needs scope chat:messages', async () => {
      const key = await t.newKey({ scopes: ['chat:contacts'] });
      for (const [method, url] of [
        ['GET', '/v1/labels'],
        ['POST', '/v1/labels'],
        ['GET', `/v1/chats/${ANA}/labels`],
        ['PUT', `/v1/chats/${ANA}/labels`],
      ] as const) {
        const res = await t.call(method, url, undefined, { authorization: `Bearer ${key}` });
        assert.deepEqual(
          res.body,
          bad(403, 'API key lacks required scope chat:messages'),
          `${method} ${url}`,
        );
      }
    });
  });

  describe(`business labels after a logout and a link to another number [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(() => t.close());

    const rows = async () =>
      (
        await t.services.store.db
          .selectFrom('labels')
          .select('label_id')
          .where('instance_id', '=', t.instance.id)
          .execute()
      ).length +
      (
        await t.services.store.db
          .selectFrom('chat_labels')
          .select('label_id')
          .where('instance_id', '=', t.instance.id)
          .execute()
      ).length;

    it("the previous account's labels are gone; its own come back when it is linked again", async () => {
      const OTHER = '5511999990046';
      for (const phone of [OWN, OTHER])
        await t.call('POST', '/v1/sandbox/users', { phone, verifiedName: `Shop ${phone}` });
      await loginSandbox(t, OWN);
      assert.equal((await t.call('POST', '/v1/labels', { name: 'VIP', color: 2 })).status, 201);
      await t.call('POST', `/v1/chats/${ANA}/labels`, { labelIds: ['1'] });
      assert.equal(await rows(), 2);
      assert.equal((await t.call('POST', '/v1/session/logout', {})).status, 200);
      assert.deepEqual((await t.call('GET', '/v1/labels')).body, okBody({ labels: [] }));
      assert.equal(await rows(), 0);

      await loginSandbox(t, OTHER);
      assert.deepEqual((await t.call('GET', '/v1/labels')).body, okBody({ labels: [] }));
      assert.deepEqual(
        (await t.call('GET', `/v1/chats/${ANA}/labels`)).body,
        okBody({ chat: ANA_JID, labels: [] }),
      );
      const theirs = await t.call('POST', '/v1/labels', { name: 'VIP' });
      assert.deepEqual(theirs.body.data, { id: '1', name: 'VIP', color: 0, predefinedId: null });

      await t.call('POST', '/v1/session/logout', {});
      await loginSandbox(t, OWN);
      const vip = { id: '1', name: 'VIP', color: 2, predefinedId: null };
      assert.deepEqual((await t.call('GET', '/v1/labels')).body, okBody({ labels: [vip] }));
      assert.deepEqual(
        (await t.call('GET', `/v1/chats/${ANA}/labels`)).body,
        okBody({ chat: ANA_JID, labels: [vip] }),
      );
    });
  });

  describe(`labels on a chat named by LID before parley knows its number [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ dialect });
      await loginSandbox(t, OWN);
      await t.call('POST', '/v1/sandbox/users', { phone: OWN, verifiedName: 'Acme Shop' });
    });
    after(() => t.close());

    const ANA_LID = `${sandboxLidOf(ANA)}@lid`;
    const byLid = `/v1/chats/${encodeURIComponent(ANA_LID)}/labels`;
    const stored = () =>
      t.services.store.db
        .selectFrom('chat_labels')
        .select(['chat', 'label_id'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('chat')
        .orderBy('label_id')
        .execute();

    it("a learned pair moves the LID's chat labels to the phone JID; they are listed and removed by either name", async () => {
      const vip = { id: '1', name: 'VIP', color: 0, predefinedId: null };
      const paid = { id: '2', name: 'Paid', color: 0, predefinedId: null };
      for (const name of ['VIP', 'Paid'])
        assert.equal((await t.call('POST', '/v1/labels', { name })).status, 201);
      const labelled = await t.call('POST', byLid, { labelIds: ['1', '2'] });
      assert.deepEqual(labelled.body, okBody({ chat: ANA_LID, labels: [vip, paid] }));
      // The same label under the phone JID as well: the move keeps one row of it.
      await t.call('POST', `/v1/chats/${ANA}/labels`, { labelIds: ['2'] });
      assert.deepEqual(await stored(), [
        { chat: ANA_LID, label_id: '1' },
        { chat: ANA_LID, label_id: '2' },
        { chat: ANA_JID, label_id: '2' },
      ]);

      // Ana writes: the sandbox tells parley her pair, and from then on both names are the chat of her phone JID.
      assert.equal((await t.call('POST', '/v1/sandbox/inbound', { phone: ANA, body: 'hi' })).status, 200);
      assert.deepEqual(await stored(), [
        { chat: ANA_JID, label_id: '1' },
        { chat: ANA_JID, label_id: '2' },
      ]);
      for (const url of [byLid, `/v1/chats/${ANA}/labels`])
        assert.deepEqual(
          (await t.call('GET', url)).body,
          okBody({ chat: ANA_JID, labels: [vip, paid] }),
          url,
        );

      const removed = await t.call('DELETE', `${byLid}/1`);
      assert.deepEqual(removed.body, okBody({ chat: ANA_JID, labels: [paid] }));
      assert.deepEqual(await stored(), [{ chat: ANA_JID, label_id: '2' }]);
      const { chats } = await platformState(t);
      assert.ok(!Object.values(chats).some((ids) => ids.includes('1')), JSON.stringify(chats));

      // A new link replays the account's chat labels; one named by the LID is stored under the phone JID.
      await t.call('POST', '/v1/session/logout', {});
      await loginSandbox(t, OWN);
      assert.deepEqual(await stored(), [{ chat: ANA_JID, label_id: '2' }]);
      assert.deepEqual((await t.call('GET', byLid)).body, okBody({ chat: ANA_JID, labels: [paid] }));
    });
  });

  describe(`business labels survive a restart and a logout [${dialect}]`, () => {
    it('the store answers after a restart; the sandbox account still has them after a new login', async () => {
      const first = await appFor(dialect);
      const { testStore, clock, key, instance } = first;
      const headers = { authorization: `Bearer ${key}` };
      const as = (t: TestApp): TestApp => ({ ...t, call: (m, u, b) => t.call(m, u, b, headers) });
      let stopped = false;
      try {
        await loginSandbox(first, OWN);
        await first.call('POST', '/v1/sandbox/users', { phone: OWN, verifiedName: 'Acme Shop' });
        await first.call('POST', '/v1/labels', { name: 'VIP', color: 2 });
        await first.call('POST', `/v1/chats/${ANA}/labels`, { labelIds: ['1'] });
        await first.app.close();
        await first.services.webhooks.stop(1000);
        await first.services.sessions.closeAll();
        first.services.keys.stop();
        stopped = true;

        const second = as(await appFor(dialect, { testStore, clock }));
        try {
          const vip = { id: '1', name: 'VIP', color: 2, predefinedId: null };
          const from = `?from=${instance.id}`;
          assert.deepEqual((await second.call('GET', `/v1/labels${from}`)).body, okBody({ labels: [vip] }));
          assert.deepEqual(
            (await second.call('GET', `/v1/chats/${ANA}/labels${from}`)).body,
            okBody({ chat: ANA_JID, labels: [vip] }),
          );
          await second.call('POST', `/v1/session/logout${from}`, {});
          await loginSandbox(second, OWN, instance.id);
          const session = second.services.sessions.ready({
            ...second.instance,
            id: instance.id,
          }) as unknown as {
            labelsState(): Promise<SandboxLabelsState>;
          };
          assert.deepEqual(await session.labelsState(), { labels: { 1: vip }, chats: { [ANA_JID]: ['1'] } });
          const next = await second.call('POST', `/v1/labels${from}`, { name: 'Paid' });
          assert.deepEqual(next.body.data, { id: '2', name: 'Paid', color: 0, predefinedId: null });
        } finally {
          await second.close();
        }
      } finally {
        if (!stopped) await first.close();
        await testStore.cleanup();
      }
    });
  });
}
