/**
 * GET /v1/channels and POST /v1/channels/follow|unfollow on the sandbox: its simulated channels are followed by
 * JID, invite code or link, listed, and unfollowed; unknown channels are 404s, bodies are validated. SQLite and
 * PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, bad, OWN } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const NEWS = {
  jid: '120363000000000001@newsletter',
  name: 'Parley News',
  description: 'Releases and tips',
  invite: '0029VaParleyNews0000000001',
};
const WEATHER = {
  jid: '120363000000000002@newsletter',
  name: 'Weather Today',
  description: 'A forecast every morning',
  invite: '0029VaWeatherToday00000002',
};

for (const dialect of testDialects()) {
  describe(`channels: GET /v1/channels, POST /v1/channels/follow and /unfollow [${dialect}]`, () => {
    let t: TestApp;
    const ok = (data: unknown) => ({ success: true, code: 200, data });

    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 409 before login', async () => {
      assert.deepEqual((await t.call('GET', '/v1/channels')).body, bad(409, 'instance is not logged in'));
      assert.deepEqual(
        (await t.call('POST', '/v1/channels/follow', { jid: NEWS.jid })).body,
        bad(409, 'instance is not logged in'),
      );
      await loginSandbox(t, OWN);
    });

    it('follows by link, code and JID; lists them; unfollows', async () => {
      assert.deepEqual((await t.call('GET', '/v1/channels')).body, ok({ channels: [] }));
      const byLink = await t.call('POST', '/v1/channels/follow', {
        invite: `https://whatsapp.com/channel/${NEWS.invite}`,
      });
      assert.deepEqual(byLink.body, ok({ channel: { ...NEWS, subscribers: 1251 }, following: true }));
      const again = await t.call('POST', '/v1/channels/follow', { jid: NEWS.jid });
      assert.deepEqual(again.body, byLink.body, 'following again changes nothing');
      const byCode = await t.call('POST', '/v1/channels/follow', { invite: WEATHER.invite });
      assert.deepEqual(byCode.body, ok({ channel: { ...WEATHER, subscribers: 48211 }, following: true }));
      assert.deepEqual(
        (await t.call('GET', '/v1/channels')).body,
        ok({
          channels: [
            { ...NEWS, subscribers: 1251 },
            { ...WEATHER, subscribers: 48211 },
          ],
        }),
      );
      const left = await t.call('POST', '/v1/channels/unfollow', { jid: NEWS.jid });
      assert.deepEqual(left.body, ok({ channel: { ...NEWS, subscribers: 1250 }, following: false }));
      assert.deepEqual(
        (await t.call('GET', '/v1/channels')).body,
        ok({ channels: [{ ...WEATHER, subscribers: 48211 }] }),
      );
    });

    it('404 for an unknown channel; 400s name the field', async () => {
      assert.deepEqual(
        (await t.call('POST', '/v1/channels/follow', { jid: '120363999999999999@newsletter' })).body,
        bad(404, 'channel not found'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/channels/unfollow', { invite: '0029VaNoSuchChannel0000000' })).body,
        bad(404, 'channel not found'),
      );
      const post = (body: unknown) => t.call('POST', '/v1/channels/follow', body);
      assert.deepEqual((await post({})).body, bad(400, 'jid or invite is required'));
      assert.deepEqual(
        (await post({ jid: NEWS.jid, invite: NEWS.invite })).body,
        bad(400, 'give jid or invite, not both'),
      );
      assert.deepEqual(
        (await post({ jid: '120363000000000001@g.us' })).body,
        bad(400, 'jid must be a channel JID, <digits>@newsletter'),
      );
      assert.deepEqual(
        (await post({ invite: 'https://example.com/channel/abc' })).body,
        bad(400, 'invite must be a channel invite code or a https://whatsapp.com/channel/<code> link'),
      );
    });

    it('needs chat:messages', async () => {
      const sessionOnly = await t.newKey({ scopes: ['chat:session'] });
      const headers = { authorization: `Bearer ${sessionOnly}` };
      assert.deepEqual(
        (await t.call('GET', '/v1/channels', undefined, headers)).body,
        bad(403, 'API key lacks required scope chat:messages'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/channels/unfollow', { jid: NEWS.jid }, headers)).body,
        bad(403, 'API key lacks required scope chat:messages'),
      );
    });
  });
}
