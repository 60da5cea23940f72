/**
 * The account's profile, privacy settings and blocklist through parley's API with a live key, against the
 * platform simulator (docs/api.md#profile, docs/decisions/0039-profile-privacy-blocklist.md): after each change the
 * simulated platform holds it (read through its control API, docs/simulator.md): the push name (an app state patch
 * the simulator decrypts with the key the phone shared), the about text, the picture bytes as uploaded (a 640×640
 * JPEG made from the PNG sent), every privacy category, and the blocklist. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const shop = '5531999990021';
const ana = '5531988887721';
const bruno = '5531977776621';
const ghost = '5531966665521';

const ok = (data: unknown) => ({ success: true, code: 200, data });

for (const dialect of testDialects()) {
  describe(`live engine: the account's profile, privacy and blocklist on the simulator (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    let png = '';

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
        [bruno, 'Bruno'],
      ] as const) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      assert.equal((await control(sim, 'POST', '/users', { phone: ghost, registered: false })).status, 201);
      await pairLive(sim, app, shop);
      const image = await sharp({
        create: { width: 32, height: 24, channels: 3, background: { r: 200, g: 40, b: 40 } },
      })
        .png()
        .toBuffer();
      png = `data:image/png;base64,${image.toString('base64')}`;
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('profile: the push name of the account (once the phone sent it), no about text, no picture', async () => {
      // The push name reaches a new companion with the phone's first history sync, shortly after linking.
      const res = await until('the push name is known', async () => {
        const got = await app.live('GET', '/v1/profile');
        return got.body.data?.name ? got : undefined;
      });
      assert.deepEqual(res.body, ok({ name: 'Shop', about: '', pictureUrl: null }));
    });

    it('PUT /v1/profile: the platform holds the new name, about text and picture', async () => {
      // The phone shares the app state key right after linking; a name change needs it.
      const res = await until('the name change is accepted', async () => {
        const put = await app.live('PUT', '/v1/profile', {
          name: 'Acme Store',
          about: 'Open 9–18',
          picture: png,
        });
        return put.status === 200 ? put : undefined;
      });
      const held = await control(sim, 'GET', `/users/${shop}/profile`);
      assert.equal(held.status, 200);
      assert.equal(held.body.pushName, 'Acme Store');
      assert.equal(held.body.about, 'Open 9–18');
      assert.match(held.body.avatar.id, /^[0-9]+$/);
      const picture = Buffer.from(held.body.picture, 'base64');
      const meta = await sharp(picture).metadata();
      assert.deepEqual([meta.format, meta.width, meta.height], ['jpeg', 640, 640]);
      const { data: pixel } = await sharp(picture)
        .extract({ left: 320, top: 320, width: 1, height: 1 })
        .raw()
        .toBuffer({
          resolveWithObject: true,
        });
      assert.ok(
        Math.abs((pixel[0] ?? 0) - 200) < 16 && (pixel[1] ?? 255) < 60,
        `red picture, got ${[...pixel]}`,
      );
      assert.deepEqual(
        res.body,
        ok({ name: 'Acme Store', about: 'Open 9–18', pictureUrl: held.body.avatar.url }),
      );
      assert.deepEqual((await app.live('GET', '/v1/profile')).body, res.body);
    });

    it('PUT /v1/profile: only the about text, the rest kept', async () => {
      const res = await app.live('PUT', '/v1/profile', { about: 'Closed on Sundays' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.about, 'Closed on Sundays');
      assert.equal(res.body.data.name, 'Acme Store');
      assert.equal((await control(sim, 'GET', `/users/${shop}/profile`)).body.about, 'Closed on Sundays');
    });

    it('privacy: the platform defaults, then a subset changed on the platform and read back', async () => {
      const defaults = {
        lastSeen: 'all',
        online: 'all',
        profilePicture: 'all',
        about: 'contacts',
        groupAdd: 'all',
        readReceipts: 'all',
      };
      assert.deepEqual((await app.live('GET', '/v1/profile/privacy')).body, ok(defaults));
      const change = {
        lastSeen: 'contacts',
        online: 'match_last_seen',
        profilePicture: 'contact_blacklist',
        about: 'none',
        groupAdd: 'contacts',
        readReceipts: 'none',
      };
      const res = await app.live('PUT', '/v1/profile/privacy', change);
      assert.deepEqual(res.body, ok(change));
      const held = (await control(sim, 'GET', `/users/${shop}/privacy`)).body;
      assert.deepEqual(
        [held.last, held.online, held.profile, held.status, held.groupadd, held.readreceipts],
        ['contacts', 'match_last_seen', 'contact_blacklist', 'none', 'contacts', 'none'],
      );
      assert.deepEqual((await app.live('GET', '/v1/profile/privacy')).body, ok(change));
      const one = await app.live('PUT', '/v1/profile/privacy', { readReceipts: 'all' });
      assert.deepEqual(one.body, ok({ ...change, readReceipts: 'all' }));
    });

    it('blocklist: block and unblock are reflected in the platform blocklist', async () => {
      assert.deepEqual((await app.live('GET', '/v1/contacts/blocklist')).body, ok({ phones: [] }));
      assert.deepEqual(
        (await app.live('POST', '/v1/contacts/block', { phone: bruno })).body,
        ok({ phones: [bruno] }),
      );
      assert.deepEqual(
        (await app.live('POST', '/v1/contacts/block', { phone: ana })).body,
        ok({ phones: [bruno, ana] }), // ascending
      );
      assert.deepEqual((await control(sim, 'GET', `/users/${shop}/blocklist`)).body, {
        phones: [bruno, ana],
      });
      assert.deepEqual(
        (await app.live('POST', '/v1/contacts/unblock', { phone: bruno })).body,
        ok({ phones: [ana] }),
      );
      assert.deepEqual((await control(sim, 'GET', `/users/${shop}/blocklist`)).body, { phones: [ana] });
      assert.deepEqual((await app.live('GET', '/v1/contacts/blocklist')).body, ok({ phones: [ana] }));
      const unregistered = await app.live('POST', '/v1/contacts/block', { phone: ghost });
      assert.deepEqual(unregistered.body, {
        error: { code: 422, message: `phone ${ghost} is not registered on the platform` },
      });
    });
  });
}
