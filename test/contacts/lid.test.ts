/**
 * LID mappings with a test key (docs/decisions/0038-lid-mappings.md): the sandbox gives every registered user a LID
 * (the number's length in two digits, then its digits reversed) and tells the account the pair the first time the
 * user writes or is written to; parley keeps every pair in `lid_mappings` and answers `GET /v1/contacts/lid` from
 * it; sends accept `<lid>@lid` and reach the user owning the LID. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { appFor, bad, OWN } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const okBody = (data: unknown) => ({ success: true, code: 200, data });

const ANA = '5511988887777';
const ANA_LID = '137777888891155';
const BRUNO = '5511977776666';
const BRUNO_LID = '136666777791155';
const CARLA = '5511966665555';
const CARLA_LID = '135555666691155';

for (const dialect of testDialects()) {
  describe(`LID mappings and @lid send targets on the sandbox (docs/decisions/0038-lid-mappings.md) [${dialect}]`, () => {
    let t: TestApp;
    const rows = () =>
      t.services.store.db
        .selectFrom('lid_mappings')
        .select(['lid', 'phone', 'updated_at'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('lid')
        .execute();

    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('validates the query, naming the field (400), before anything else', async () => {
      const cases: [string, string][] = [
        ['/v1/contacts/lid', 'lid or phone is required'],
        [`/v1/contacts/lid?lid=${ANA_LID}&phone=${ANA}`, 'give either lid or phone, not both'],
        ['/v1/contacts/lid?lid=12ab', 'lid must be a LID: 1 to 20 digits, optionally followed by @lid'],
        ['/v1/contacts/lid?lid=123@g.us', 'lid must be a LID: 1 to 20 digits, optionally followed by @lid'],
        [
          '/v1/contacts/lid?lid=123456789012345678901',
          'lid must be a LID: 1 to 20 digits, optionally followed by @lid',
        ],
        [
          '/v1/contacts/lid?phone=%2B5511988887777',
          'phone must be digits only, international format, no leading +',
        ],
      ];
      for (const [url, message] of cases) {
        const res = await t.call('GET', url);
        assert.equal(res.status, 400, url);
        assert.deepEqual(res.body, bad(400, message), url);
      }
    });

    it('404 for a pair parley has not seen, before login; a stored pair answers without a session', async () => {
      assert.deepEqual(
        (await t.call('GET', `/v1/contacts/lid?lid=${ANA_LID}`)).body,
        bad(404, `no LID mapping known for ${ANA_LID}@lid`),
      );
      assert.deepEqual(
        (await t.call('GET', `/v1/contacts/lid?phone=${ANA}`)).body,
        bad(404, `no LID mapping known for ${ANA}`),
      );
      await upsertLidMappings(
        t.services.store.db,
        t.instance.id,
        [{ lid: '999000111222333', phone: '5511955554444' }],
        t.clock(),
      );
      const res = await t.call('GET', '/v1/contacts/lid?phone=5511955554444');
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, okBody({ phone: '5511955554444', lid: '999000111222333@lid' }));
      const byLid = await t.call('GET', '/v1/contacts/lid?lid=999000111222333@lid');
      assert.deepEqual(byLid.body, okBody({ phone: '5511955554444', lid: '999000111222333@lid' }));
    });

    it('an inbound message records its sender pair once: GET answers by LID (digits or @lid) and by phone', async () => {
      await loginSandbox(t, OWN);
      const first = await t.call('POST', '/v1/sandbox/inbound', { phone: ANA, body: 'Oi' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.deepEqual(
        (await rows()).filter((r) => r.phone === ANA),
        [{ lid: ANA_LID, phone: ANA, updated_at: t.clock() }],
      );
      for (const query of [`lid=${ANA_LID}`, `lid=${ANA_LID}@lid`, `phone=${ANA}`]) {
        const res = await t.call('GET', `/v1/contacts/lid?${query}`);
        assert.equal(res.status, 200, query);
        assert.deepEqual(res.body, okBody({ phone: ANA, lid: `${ANA_LID}@lid` }), query);
      }
    });

    it('a pair not stored yet is asked of the platform, answered and stored; unknown ones stay 404', async () => {
      assert.equal(
        (await rows()).some((r) => r.phone === BRUNO),
        false,
      );
      t.clock.advance(5000);
      const res = await t.call('GET', `/v1/contacts/lid?phone=${BRUNO}`);
      assert.deepEqual(res.body, okBody({ phone: BRUNO, lid: `${BRUNO_LID}@lid` }));
      assert.deepEqual(
        (await rows()).filter((r) => r.phone === BRUNO),
        [{ lid: BRUNO_LID, phone: BRUNO, updated_at: t.clock() }],
      );
      const unregistered = await t.call('GET', '/v1/contacts/lid?phone=5511999990000');
      assert.deepEqual(unregistered.body, bad(404, 'no LID mapping known for 5511999990000'));
      const nobody = await t.call('GET', '/v1/contacts/lid?lid=1234567');
      assert.deepEqual(nobody.body, bad(404, 'no LID mapping known for 1234567@lid'));
    });

    it('a send to <lid>@lid arrives at the user owning the LID: stored and answered under its phone JID', async () => {
      const sent = await t.call('POST', '/v1/messages/send', {
        phone: `${CARLA_LID}@lid`,
        body: 'Olá, Carla',
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const row = await t.services.store.db
        .selectFrom('messages')
        .select(['chat', 'sender', 'type', 'content', 'state'])
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', sent.body.data.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        [row.chat, row.sender, row.type, JSON.parse(row.content).text, row.state],
        [`${CARLA}@s.whatsapp.net`, `${OWN}@s.whatsapp.net`, 'text', 'Olá, Carla', 'sent'],
      );
      assert.deepEqual(
        (await rows()).filter((r) => r.phone === CARLA).map((r) => [r.lid, r.phone]),
        [[CARLA_LID, CARLA]],
        'the pair the send used is stored',
      );
      // The user's receipt names the phone chat: the message is the one the LID addressed.
      const receipt = await t.call('POST', '/v1/sandbox/receipt', { id: sent.body.data.id, state: 'read' });
      assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
      // Reactions and presence take the same address.
      const react = await t.call('POST', '/v1/messages/react', {
        phone: `${CARLA_LID}@lid`,
        id: `me:${sent.body.data.id}`,
        body: '👍',
      });
      assert.equal(react.status, 200, JSON.stringify(react.body));
      // An edit names the chat by the same LID: the message stored under the phone JID is found through the pair.
      const edit = await t.call('POST', '/v1/messages/edit', {
        phone: `${CARLA_LID}@lid`,
        id: sent.body.data.id,
        body: 'Olá, Carla!',
      });
      assert.equal(edit.status, 200, JSON.stringify(edit.body));
      const edited = await t.services.store.db
        .selectFrom('messages')
        .select(['content'])
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', sent.body.data.id)
        .executeTakeFirstOrThrow();
      assert.equal(JSON.parse(edited.content).text, 'Olá, Carla!');
      const elsewhere = await t.call('POST', '/v1/messages/edit', {
        phone: `${ANA_LID}@lid`,
        id: sent.body.data.id,
        body: 'x',
      });
      assert.deepEqual(elsewhere.body, bad(404, `message ${sent.body.data.id} not found in this chat`));
    });

    it('a read receipt naming the chat by <lid>@lid marks the message read, as naming it by phone does', async () => {
      const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone: ANA, body: 'Leu?' });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      const id = inbound.body.data.id;
      const read = await t.call('POST', '/v1/messages/read', { id: [id], chatPhone: `${ANA_LID}@lid` });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const message = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(message.body.data.state, 'read', JSON.stringify(message.body));
      const chats = await t.call('GET', '/v1/chats');
      const chat = chats.body.data.chats.find((c: { jid: string }) => c.jid === `${ANA}@s.whatsapp.net`);
      assert.equal(chat?.unreadCount, 0, JSON.stringify(chats.body));
    });

    it('the chat routes take <lid>@lid: the chat of the number parley keeps for the LID', async () => {
      const history = await t.call('GET', `/v1/chats/${CARLA_LID}@lid/messages`);
      assert.equal(history.status, 200, JSON.stringify(history.body));
      const byPhone = await t.call('GET', `/v1/chats/${CARLA}/messages`);
      assert.deepEqual(history.body, byPhone.body);
      const chats = history.body.data.messages.map((m: { chat: string }) => m.chat);
      assert.ok(chats.length > 0);
      assert.deepEqual(new Set(chats), new Set([`${CARLA}@s.whatsapp.net`]));
      const archive = await t.call('POST', `/v1/chats/${CARLA_LID}@lid/archive`);
      assert.equal(archive.status, 200, JSON.stringify(archive.body));
      assert.equal(archive.body.data.chat, `${CARLA}@s.whatsapp.net`);
    });

    it('a LID no user owns is 422 not registered; malformed @lid forms are 400 naming phone', async () => {
      const unknown = await t.call('POST', '/v1/messages/send', { phone: '1234567@lid', body: 'x' });
      assert.equal(unknown.status, 422);
      assert.deepEqual(unknown.body, bad(422, 'recipient 1234567@lid is not registered on the platform'));
      for (const phone of [
        '@lid',
        'abc@lid',
        '12:3@lid',
        '123456789012345678901@lid',
        '123@LID',
        '123@lid.us',
      ]) {
        const res = await t.call('POST', '/v1/messages/send', { phone, body: 'x' });
        assert.equal(res.status, 400, phone);
        assert.deepEqual(
          res.body,
          bad(400, 'phone must be digits only, international format, no leading +'),
          phone,
        );
      }
    });
  });
}
