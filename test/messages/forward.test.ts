/**
 * POST /v1/messages/forward on the sandbox: a stored message (text, location, media received from a user, the
 * account's own text) is sent again to another chat, marked forwarded with WhatsApp's forwarding score (+1 for a
 * received message, +0 for the account's own, as Baileys' generateForwardMessageContent); unknown ids are 404s,
 * reactions and media parley cannot fetch again are refused, bodies are validated. SQLite and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, dataUri, fixture, OWN, PEER, UNREGISTERED } from './support.ts';

const OTHER = '5511977776666';
const T0 = Date.parse('2026-01-15T12:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`messages: POST /v1/messages/forward [${dialect}]`, () => {
    let t: TestApp;
    const forward = (body: unknown) => t.call('POST', '/v1/messages/forward', body);
    const stored = async (id: string) => {
      const res = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data;
    };

    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 404 for an unknown message', async () => {
      assert.deepEqual(
        (await forward({ phone: OTHER, messageId: '3EB0000000000000000000' })).body,
        bad(404, 'message not found'),
      );
      await loginSandbox(t, OWN);
      t.clock.set(T0);
    });

    it("forwards a user's text to another chat marked forwarded (score 1), then a forward of it with score 2", async () => {
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'Meet at 5?' });
      const original = inbound.body.data.id;
      const res = await forward({ phone: OTHER, messageId: original });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id = res.body.data.id;
      assert.notEqual(id, original);
      assert.deepEqual(res.body, {
        success: true,
        code: 200,
        data: { details: 'Sent', id, timestamp: new Date(T0).toISOString() },
      });
      const sent = await stored(id);
      assert.equal(sent.chat, `${OTHER}@s.whatsapp.net`);
      assert.equal(sent.fromMe, true);
      assert.deepEqual(sent.message, {
        conversation: 'Meet at 5?',
        contextInfo: { isForwarded: true, forwardingScore: 1 },
      });

      const again = await forward({ phone: PEER, messageId: id });
      assert.deepEqual(
        (await stored(again.body.data.id)).message,
        {
          conversation: 'Meet at 5?',
          contextInfo: { isForwarded: true, forwardingScore: 1 },
        },
        "forwarding the account's own forward keeps its score",
      );
    });

    it("the account's own message goes out as a plain copy (score 0: not marked forwarded)", async () => {
      const mine = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'See you there' });
      const res = await forward({ phone: OTHER, messageId: mine.body.data.id });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual((await stored(res.body.data.id)).message, { conversation: 'See you there' });
    });

    it('forwards a location and a received image (the same bytes, caption kept)', async () => {
      const pin = await t.call('POST', '/v1/messages/send/location', {
        phone: PEER,
        latitude: -23.55,
        longitude: -46.63,
        name: 'Shop',
      });
      const loc = await forward({ phone: OTHER, messageId: pin.body.data.id });
      assert.deepEqual((await stored(loc.body.data.id)).message.locationMessage, {
        degreesLatitude: -23.55,
        degreesLongitude: -46.63,
        name: 'Shop',
        address: '',
      });

      const jpeg = fixture('tiny.jpg');
      const photo = await t.call('POST', '/v1/sandbox/inbound/media', {
        phone: PEER,
        kind: 'image',
        media: dataUri(jpeg, 'image/jpeg'),
        caption: 'Broken part',
      });
      assert.equal(photo.status, 200, JSON.stringify(photo.body));
      const res = await forward({ phone: OTHER, messageId: photo.body.data.id });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual((await stored(res.body.data.id)).message, {
        conversation: 'Broken part',
        imageMessage: { mimetype: 'image/jpeg', fileLength: jpeg.length, caption: 'Broken part' },
        contextInfo: { isForwarded: true, forwardingScore: 1 },
      });
    });

    it('refuses reactions, media parley cannot fetch again, unregistered recipients and bad bodies', async () => {
      const reaction = await t.call('POST', '/v1/messages/react', {
        phone: PEER,
        id: 'me:3EB0C767D26A1D2E5B3A61',
        body: '👍',
      });
      assert.equal(reaction.status, 200, JSON.stringify(reaction.body));
      const row = await t.services.store.db
        .selectFrom('messages')
        .select(['id'])
        .where('instance_id', '=', t.instance.id)
        .where('type', '=', 'reaction')
        .executeTakeFirstOrThrow();
      const rid = row.id;
      assert.deepEqual(
        (await forward({ phone: OTHER, messageId: rid })).body,
        bad(400, `message ${rid} cannot be forwarded (it is a reaction message)`),
      );
      const image = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: dataUri(fixture('tiny.png'), 'image/png'),
      });
      assert.equal(image.status, 200, JSON.stringify(image.body));
      const iid = image.body.data.id;
      assert.deepEqual(
        (await forward({ phone: OTHER, messageId: iid })).body,
        bad(
          404,
          `the media of message ${iid} cannot be downloaded: parley keeps no platform reference for it (files sent through parley are not kept)`,
        ),
      );
      const text = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'hello' });
      assert.deepEqual(
        (await forward({ phone: UNREGISTERED, messageId: text.body.data.id })).body,
        bad(422, `recipient ${UNREGISTERED} is not registered on the platform`),
      );
      assert.deepEqual((await forward({ phone: OTHER })).body, bad(400, 'messageId is required'));
      assert.deepEqual((await forward({ messageId: text.body.data.id })).body, bad(400, 'phone is required'));
      assert.deepEqual(
        (await forward({ phone: '+5511', messageId: text.body.data.id })).body,
        bad(400, 'phone must be digits only, international format, no leading +'),
      );
      assert.deepEqual(
        (await forward({ phone: OTHER, messageId: '' })).body,
        bad(400, 'messageId must not be empty'),
      );
    });

    it('needs chat:messages', async () => {
      const sessionOnly = await t.newKey({ scopes: ['chat:session'] });
      const res = await t.call(
        'POST',
        '/v1/messages/forward',
        { phone: OTHER, messageId: '3EB0C767D26A1D2E5B3A61' },
        { authorization: `Bearer ${sessionOnly}` },
      );
      assert.deepEqual(res.body, bad(403, 'API key lacks required scope chat:messages'));
    });
  });
}
