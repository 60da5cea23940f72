/**
 * Chat actions and starring through parley's API with a live key, against the platform simulator
 * (docs/api.md#chats, docs/decisions/0043-chat-actions-and-star.md): after each action the simulated platform
 * holds the account's chat state (read through its control API, `GET /control/users/{phone}/chats`,
 * docs/simulator.md), decrypted from the app state patch Baileys sent with the key the phone shared. Runs on
 * SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const shop = '5531999990043';
const ana = '5531988887743';
const anaJid = `${ana}@s.whatsapp.net`;

const ok = (data: unknown) => ({ success: true, code: 200, data });
const blank = { archived: false, pinned: false, mutedUntil: null, markedUnread: false };

for (const dialect of testDialects()) {
  describe(`live engine: chat actions and starring on the simulator (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    let received = '';

    /** The account's chat state as the simulated platform holds it. */
    const held = async () => {
      const res = await control(sim, 'GET', `/users/${shop}/chats`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body as { chats: Record<string, typeof blank>; starred: unknown[] };
    };

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
      ] as const) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      const sent = await control(sim, 'POST', '/messages', {
        from: ana,
        to: shop,
        text: 'Is the shop open?',
      });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      received = sent.body.id;
      await until('the message is stored', async () => {
        const got = await app.live('GET', `/v1/messages/${received}`);
        return got.status === 200 ? got : undefined;
      });
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('archive: the platform holds the chat archived (once the phone shared the app state key)', async () => {
      assert.deepEqual(await held(), { chats: {}, starred: [] });
      const res = await until('the archive is accepted', async () => {
        const got = await app.live('POST', `/v1/chats/${ana}/archive`);
        return got.status === 200 ? got : undefined;
      });
      assert.deepEqual(res.body, ok({ details: 'Archived', chat: anaJid }));
      assert.deepEqual((await held()).chats[anaJid], { ...blank, archived: true });
    });

    it('unarchive, pin, mark-unread, unpin: the platform state after each', async () => {
      const steps: [string, string, Partial<typeof blank>][] = [
        ['unarchive', 'Unarchived', { archived: false }],
        ['pin', 'Pinned', { pinned: true }],
        ['mark-unread', 'Marked as unread', { markedUnread: true }],
        ['unpin', 'Unpinned', { pinned: false }],
      ];
      let expected = { ...blank };
      for (const [action, details, change] of steps) {
        const res = await app.live('POST', `/v1/chats/${ana}/${action}`);
        assert.deepEqual(res.body, ok({ details, chat: anaJid }), action);
        expected = { ...expected, ...change };
        assert.deepEqual((await held()).chats[anaJid], expected, action);
      }
    });

    it('mute until a time, mute always, unmute', async () => {
      const end = new Date(app.t.clock() + 8 * 3600_000);
      const muted = await app.live('POST', `/v1/chats/${ana}/mute`, { until: end.toISOString() });
      assert.deepEqual(muted.body, ok({ details: 'Muted', chat: anaJid, mutedUntil: end.toISOString() }));
      assert.equal((await held()).chats[anaJid]?.mutedUntil, end.getTime());
      const always = await app.live('POST', `/v1/chats/${ana}/mute`, {});
      assert.deepEqual(always.body, ok({ details: 'Muted', chat: anaJid, mutedUntil: null }));
      assert.equal((await held()).chats[anaJid]?.mutedUntil, -1);
      const unmuted = await app.live('POST', `/v1/chats/${ana}/unmute`);
      assert.deepEqual(unmuted.body, ok({ details: 'Unmuted', chat: anaJid }));
      assert.equal((await held()).chats[anaJid]?.mutedUntil, null);
    });

    it('star and unstar a received message; 404 for one parley never stored', async () => {
      const starred = await app.live('POST', `/v1/messages/${received}/star`);
      assert.deepEqual(starred.body, ok({ details: 'Starred', id: received, chat: anaJid }));
      assert.deepEqual((await held()).starred, [{ chat: anaJid, id: received, fromMe: false }]);
      const unstarred = await app.live('POST', `/v1/messages/${received}/unstar`);
      assert.deepEqual(unstarred.body, ok({ details: 'Unstarred', id: received, chat: anaJid }));
      assert.deepEqual((await held()).starred, []);
      const missing = await app.live('POST', '/v1/messages/3EB0NOTSTORED/star');
      assert.deepEqual(missing.body, { error: { code: 404, message: 'message not found' } });
    });
  });
}
