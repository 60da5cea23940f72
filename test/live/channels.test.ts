/**
 * GET /v1/channels and POST /v1/channels/follow|unfollow with a live key against the platform simulator: channels
 * made through the control API are followed by invite link and by JID (Baileys' newsletterMetadata and
 * newsletterFollow `w:mex` queries), listed (the platform's `xwa2_newsletter_subscribed` query) and unfollowed; the
 * simulator's control API shows which channels the account follows. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator } from './support.ts';

const shop = '5541999990000';
const ana = '5541988887777';

for (const dialect of testDialects()) {
  describe(`live engine: channels against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    let news: { jid: string; invite: string; link: string };
    let quiet: { jid: string; invite: string };
    const followedAtPlatform = async () =>
      ((await control(sim, 'GET', `/users/${shop}/channels`)).body as { jid: string }[]).map((c) => c.jid);

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
      ]) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      const made = await control(sim, 'POST', '/channels', { name: 'Shop News', description: 'Offers' });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      news = made.body;
      quiet = (await control(sim, 'POST', '/channels', { name: 'Quiet' })).body;
      await pairLive(sim, app, shop);
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('follows by invite link and by JID; the platform records both; the list shows them', async () => {
      assert.deepEqual((await app.live('GET', '/v1/channels')).body.data, { channels: [] });
      const byLink = await app.live('POST', '/v1/channels/follow', { invite: news.link });
      assert.equal(byLink.status, 200, JSON.stringify(byLink.body));
      assert.deepEqual(byLink.body.data, {
        channel: {
          jid: news.jid,
          name: 'Shop News',
          description: 'Offers',
          subscribers: 1,
          invite: news.invite,
        },
        following: true,
      });
      const byJid = await app.live('POST', '/v1/channels/follow', { jid: quiet.jid });
      assert.equal(byJid.status, 200, JSON.stringify(byJid.body));
      assert.deepEqual(byJid.body.data.channel, {
        jid: quiet.jid,
        name: 'Quiet',
        subscribers: 1,
        invite: quiet.invite,
      });
      assert.deepEqual((await followedAtPlatform()).sort(), [news.jid, quiet.jid].sort());
      const list = await app.live('GET', '/v1/channels');
      assert.equal(list.status, 200, JSON.stringify(list.body));
      assert.deepEqual(
        list.body.data.channels.map((c: { jid: string; name: string }) => [c.jid, c.name]),
        [
          [news.jid, 'Shop News'],
          [quiet.jid, 'Quiet'],
        ],
      );
    });

    it('unfollows; unknown channels are 404s', async () => {
      const left = await app.live('POST', '/v1/channels/unfollow', { invite: news.invite });
      assert.equal(left.status, 200, JSON.stringify(left.body));
      assert.equal(left.body.data.following, false);
      assert.equal(left.body.data.channel.subscribers, 0);
      assert.deepEqual(await followedAtPlatform(), [quiet.jid]);
      const shown = await control(sim, 'GET', `/channels/${news.jid}`);
      assert.deepEqual(shown.body.followers, []);
      assert.deepEqual(
        (await app.live('POST', '/v1/channels/follow', { jid: '120363999999999999@newsletter' })).body,
        { error: { code: 404, message: 'channel not found' } },
      );
      assert.deepEqual(
        (await app.live('POST', '/v1/channels/follow', { invite: '0029VaNoSuchChannel0000000' })).body,
        { error: { code: 404, message: 'channel not found' } },
      );
    });
  });
}
