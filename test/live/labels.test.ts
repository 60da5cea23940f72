/**
 * Business labels through parley's API with a live key, against the platform simulator (docs/api.md#labels,
 * docs/decisions/0045-business-labels.md): after each change the simulated platform holds the account's labels and
 * chat labels (read through its control API, `GET /control/users/{phone}/labels`, docs/simulator.md), decrypted from
 * the app state patch Baileys sent with the key the phone shared; labels the phone makes reach parley through the
 * `server_sync` notification and the resync Baileys answers it with; a personal account is refused 409 after the
 * platform answered no business profile. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const shop = '5531999990045';
const solo = '5531999990046';
const older = '5531999990047';
const ana = '5531988887745';
const anaJid = `${ana}@s.whatsapp.net`;

const ok = (data: unknown) => ({ success: true, code: 200, data });
const label = (id: string, name: string, color: number) => ({ id, name, color, predefinedId: null });

for (const dialect of testDialects()) {
  describe(`live engine: business labels on the simulator (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;

    /** The account's labels as the simulated platform holds them. */
    const held = async (phone = shop) => {
      const res = await control(sim, 'GET', `/users/${phone}/labels`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body as { labels: unknown[]; chats: Record<string, string[]> };
    };

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      for (const user of [
        { phone: shop, pushName: 'Shop', verifiedName: 'Acme Shop' },
        { phone: solo, pushName: 'Solo' },
        { phone: older, pushName: 'Older', verifiedName: 'Older Shop' },
        { phone: ana, pushName: 'Ana' },
      ]) {
        assert.equal((await control(sim, 'POST', '/users', user)).status, 201);
      }
      await pairLive(sim, app, shop);
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('create: 201, and the platform holds the label (once the phone shared the app state key)', async () => {
      assert.deepEqual(await held(), { labels: [], chats: {} });
      const res = await until('the label is accepted', async () => {
        const got = await app.live('POST', '/v1/labels', { name: 'New customer', color: 1 });
        return got.status === 201 ? got : undefined;
      });
      assert.deepEqual(res.body, { success: true, code: 201, data: label('1', 'New customer', 1) });
      assert.deepEqual(await held(), { labels: [label('1', 'New customer', 1)], chats: {} });
      assert.deepEqual(
        (await app.live('GET', '/v1/labels')).body,
        ok({ labels: [label('1', 'New customer', 1)] }),
      );
    });

    it('label a chat, rename, recolour: the platform state after each', async () => {
      const added = await app.live('POST', `/v1/chats/${ana}/labels`, { labelIds: ['1'] });
      assert.deepEqual(added.body, ok({ chat: anaJid, labels: [label('1', 'New customer', 1)] }));
      assert.deepEqual((await held()).chats, { [anaJid]: ['1'] });
      const renamed = await app.live('PATCH', '/v1/labels/1', { name: 'Lead', color: 2 });
      assert.deepEqual(renamed.body, ok(label('1', 'Lead', 2)));
      assert.deepEqual((await held()).labels, [label('1', 'Lead', 2)]);
    });

    it('the phone makes a label and labels the chat: parley learns both from the app state sync', async () => {
      const made = await control(sim, 'POST', `/users/${shop}/labels`, { name: 'Paid', color: 5 });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      assert.deepEqual(made.body.label, label('2', 'Paid', 5));
      assert.equal(made.body.devices, 1);
      await until('parley knows label 2', async () => {
        const got = await app.live('GET', '/v1/labels');
        return got.body.data.labels.length === 2 ? got : undefined;
      });
      assert.deepEqual(
        (await app.live('GET', '/v1/labels')).body,
        ok({ labels: [label('1', 'Lead', 2), label('2', 'Paid', 5)] }),
      );
      const tagged = await control(sim, 'POST', `/users/${shop}/chat-labels`, { chat: ana, labelId: '2' });
      assert.equal(tagged.status, 200, JSON.stringify(tagged.body));
      assert.deepEqual(tagged.body.labels, ['1', '2']);
      const chat = await until('parley knows the chat has label 2', async () => {
        const got = await app.live('GET', `/v1/chats/${ana}/labels`);
        return got.body.data.labels.length === 2 ? got : undefined;
      });
      assert.deepEqual(
        chat.body,
        ok({ chat: anaJid, labels: [label('1', 'Lead', 2), label('2', 'Paid', 5)] }),
      );
    });

    it('PUT sets, DELETE takes one off, deleting a label: the platform state after each', async () => {
      const set = await app.live('PUT', `/v1/chats/${ana}/labels`, { labelIds: ['2'] });
      assert.deepEqual(set.body, ok({ chat: anaJid, labels: [label('2', 'Paid', 5)] }));
      assert.deepEqual((await held()).chats, { [anaJid]: ['2'] });
      const off = await app.live('DELETE', `/v1/chats/${ana}/labels/2`);
      assert.deepEqual(off.body, ok({ chat: anaJid, labels: [] }));
      assert.deepEqual((await held()).chats, {});
      const gone = await app.live('DELETE', '/v1/labels/1');
      assert.deepEqual(gone.body, ok(label('1', 'Lead', 2)));
      assert.deepEqual(await held(), { labels: [label('2', 'Paid', 5)], chats: {} });
      assert.deepEqual((await app.live('GET', '/v1/labels')).body, ok({ labels: [label('2', 'Paid', 5)] }));
      const unknown = await app.live('POST', `/v1/chats/${ana}/labels`, { labelIds: ['1'] });
      assert.deepEqual(unknown.body, { error: { code: 404, message: 'label 1 not found' } });
    });

    /** A new live instance of `app`'s organisation, paired with `phone`. */
    const another = async (name: string, phone: string): Promise<LiveApp> => {
      const instanceId = (await app.t.newInstance('live', name)).id;
      const live: LiveApp['live'] = (method, url, body) =>
        app.t.call(method, `${url}${url.includes('?') ? '&' : '?'}from=${instanceId}`, body, {
          authorization: `Bearer ${app.liveKey}`,
        });
      const other: LiveApp = {
        ...app,
        instanceId,
        live,
        status: async () => (await live('GET', '/v1/session/status')).body.data,
      };
      await pairLive(sim, other, phone);
      return other;
    };

    it('a personal account: 409 naming the reason, nothing reaches the platform', async () => {
      const { live } = await another('solo', solo);
      const res = await live('POST', '/v1/labels', { name: 'VIP' });
      assert.equal(res.status, 409);
      assert.deepEqual(res.body, {
        error: {
          code: 409,
          message: 'this account is not a WhatsApp Business account: labels are a business feature',
        },
      });
      assert.deepEqual(await held(solo), { labels: [], chats: {} });
    });

    it('labels parley never saw (its app state version already current): a new label does not take their id', async () => {
      const shop2 = await another('older', older);
      const made = await control(sim, 'POST', `/users/${older}/labels`, { name: 'Old', color: 3 });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      assert.deepEqual(made.body.label, label('1', 'Old', 3));
      await until('parley knows label 1', async () => {
        const got = await shop2.live('GET', '/v1/labels');
        return got.body.data.labels.length === 1 ? got : undefined;
      });
      // As for an instance linked before parley recorded labels: Baileys' stored app state version of the
      // collection is current, so no sync brings label 1 again.
      await app.t.services.store.db
        .deleteFrom('labels')
        .where('instance_id', '=', shop2.instanceId)
        .execute();
      assert.deepEqual((await shop2.live('GET', '/v1/labels')).body, ok({ labels: [] }));
      const res = await shop2.live('POST', '/v1/labels', { name: 'New' });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.deepEqual(res.body.data, label('2', 'New', 0));
      assert.deepEqual(await held(older), {
        labels: [label('1', 'Old', 3), label('2', 'New', 0)],
        chats: {},
      });
      assert.deepEqual(
        (await shop2.live('GET', '/v1/labels')).body,
        ok({ labels: [label('1', 'Old', 3), label('2', 'New', 0)] }),
      );
      const next = await shop2.live('POST', '/v1/labels', { name: 'Newer' });
      assert.deepEqual(next.body.data, label('3', 'Newer', 0), 'once per socket: the store answers now');
    });
  });
}
