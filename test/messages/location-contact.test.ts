import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, messageRow, OWN, OWN_ID, PEER, RFC3339, UNREGISTERED } from './support.ts';

const VCARD = [
  'BEGIN:VCARD',
  'VERSION:3.0',
  'N:Souza;Ana;;;',
  'FN:Ana Souza',
  'item1.TEL;type=CELL;waid=5511999990002:+55 11 99999-0002',
  'END:VCARD',
].join('\n');

for (const dialect of testDialects()) {
  describe(`location and contact sends (docs/api.md#messages, docs/decisions/0017-messages-and-media.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 409 before login on both routes', async () => {
      const location = await t.call('POST', '/v1/messages/send/location', {
        phone: PEER,
        latitude: 1,
        longitude: 2,
      });
      assert.deepEqual(location.body, bad(409, 'instance is not logged in'));
      const contact = await t.call('POST', '/v1/messages/send/contact', {
        phone: PEER,
        name: 'Ana',
        vcard: VCARD,
      });
      assert.deepEqual(contact.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
    });

    it('location: sends and stores coordinates, name and address; replies with id', async () => {
      const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'where?' });
      const res = await t.call('POST', '/v1/messages/send/location', {
        phone: PEER,
        latitude: -23.5613,
        longitude: -46.6565,
        name: 'Avenida Paulista',
        address: 'Av. Paulista, 1578',
        id: first.body.data.id,
      });
      assert.equal(res.status, 200);
      assert.equal(res.body.data.details, 'Sent');
      assert.match(res.body.data.id, OWN_ID);
      assert.match(res.body.data.timestamp, RFC3339);
      const row = await messageRow(t, res.body.data.id);
      assert.equal(row?.type, 'location');
      assert.deepEqual(JSON.parse(row?.content ?? '{}'), {
        kind: 'location',
        latitude: -23.5613,
        longitude: -46.6565,
        name: 'Avenida Paulista',
        address: 'Av. Paulista, 1578',
        quotedId: first.body.data.id,
      });
    });

    it('location: an empty name and address are not stored, as the live engine stores none', async () => {
      const res = await t.call('POST', '/v1/messages/send/location', {
        phone: PEER,
        latitude: 1,
        longitude: 2,
        name: '',
        address: '',
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const row = await messageRow(t, res.body.data.id);
      assert.deepEqual(JSON.parse(row?.content ?? '{}'), { kind: 'location', latitude: 1, longitude: 2 });
    });

    it('location: latitude −90..90 and longitude −180..180, both required numbers', async () => {
      const send = (body: Record<string, unknown>) =>
        t.call('POST', '/v1/messages/send/location', { phone: PEER, ...body });
      for (const latitude of [-90, 90, 0]) {
        assert.equal((await send({ latitude, longitude: 180 })).status, 200, `latitude ${latitude}`);
      }
      assert.equal((await send({ latitude: 0, longitude: -180 })).status, 200);
      const LAT = 'latitude must be a number from -90 to 90';
      const LONG = 'longitude must be a number from -180 to 180';
      assert.deepEqual((await send({ latitude: 90.0001, longitude: 0 })).body, bad(400, LAT));
      assert.deepEqual((await send({ latitude: -91, longitude: 0 })).body, bad(400, LAT));
      assert.deepEqual((await send({ latitude: '10', longitude: 0 })).body, bad(400, LAT));
      assert.deepEqual((await send({ latitude: 0, longitude: 180.5 })).body, bad(400, LONG));
      assert.deepEqual((await send({ latitude: 0, longitude: -181 })).body, bad(400, LONG));
      assert.deepEqual((await send({ longitude: 0 })).body, bad(400, 'latitude is required'));
      assert.deepEqual((await send({ latitude: 0 })).body, bad(400, 'longitude is required'));
      const noPhone = await t.call('POST', '/v1/messages/send/location', { latitude: 0, longitude: 0 });
      assert.deepEqual(noPhone.body, bad(400, 'phone is required'));
      const unregistered = await t.call('POST', '/v1/messages/send/location', {
        phone: UNREGISTERED,
        latitude: 0,
        longitude: 0,
      });
      assert.deepEqual(
        unregistered.body,
        bad(422, `recipient ${UNREGISTERED} is not registered on the platform`),
      );
    });

    it('contact: sends and stores the display name and vCard', async () => {
      const res = await t.call('POST', '/v1/messages/send/contact', {
        phone: PEER,
        name: 'Ana Souza',
        vcard: VCARD,
      });
      assert.equal(res.status, 200);
      assert.match(res.body.data.id, OWN_ID);
      const row = await messageRow(t, res.body.data.id);
      assert.deepEqual(JSON.parse(row?.content ?? '{}'), {
        kind: 'contact',
        name: 'Ana Souza',
        vcard: VCARD,
      });
      const crlf = VCARD.replaceAll('\n', '\r\n');
      assert.equal(
        (await t.call('POST', '/v1/messages/send/contact', { phone: PEER, name: 'Ana', vcard: crlf })).status,
        200,
        'CRLF line breaks',
      );
    });

    it('contact: a vCard missing BEGIN:VCARD, FN, N, TEL or END:VCARD is 400 naming the line', async () => {
      const without = (prefix: string) =>
        VCARD.split('\n')
          .filter((line) => !line.startsWith(prefix))
          .join('\n');
      const cases = [
        ['BEGIN:', 'vcard must contain the line BEGIN:VCARD'],
        ['FN:', 'vcard must contain an FN line'],
        ['N:', 'vcard must contain an N line'],
        ['item1.TEL', 'vcard must contain a TEL line'],
        ['END:', 'vcard must contain the line END:VCARD'],
      ] as const;
      for (const [prefix, message] of cases) {
        const res = await t.call('POST', '/v1/messages/send/contact', {
          phone: PEER,
          name: 'Ana',
          vcard: without(prefix),
        });
        assert.deepEqual(res.body, bad(400, message), prefix);
      }
      const noteOnly = VCARD.replace('N:Souza;Ana;;;', 'NOTE:not a name');
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send/contact', { phone: PEER, name: 'Ana', vcard: noteOnly }))
          .body,
        bad(400, 'vcard must contain an N line'),
        'NOTE is not N',
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send/contact', { phone: PEER, vcard: VCARD })).body,
        bad(400, 'name is required'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/send/contact', { phone: PEER, name: 'Ana' })).body,
        bad(400, 'vcard is required'),
      );
    });

    it('contact: a folded line is not a property, and the vCard is one card from BEGIN:VCARD to END:VCARD', async () => {
      const send = (vcard: string) =>
        t.call('POST', '/v1/messages/send/contact', { phone: PEER, name: 'Ana', vcard });
      const lines = VCARD.split('\n');
      // RFC 6350 §3.2: a line starting with a space or a tab continues the one before it.
      const foldedTel = lines
        .map((line) => (line.startsWith('item1.TEL') ? `NOTE:call\n ${line}` : line))
        .join('\n');
      assert.deepEqual((await send(foldedTel)).body, bad(400, 'vcard must contain a TEL line'), 'folded TEL');
      const foldedN = VCARD.replace('N:Souza;Ana;;;', 'NOTE:x\n\tN:Souza;Ana;;;');
      assert.deepEqual((await send(foldedN)).body, bad(400, 'vcard must contain an N line'), 'folded N');
      const folded = VCARD.replace('FN:Ana Souza', 'FN:Ana\r\n  Souza');
      assert.equal((await send(folded)).status, 200, 'a folded FN is still an FN line');
      const reversed = ['END:VCARD', ...lines.slice(1, -1), 'BEGIN:VCARD'].join('\n');
      assert.deepEqual((await send(reversed)).body, bad(400, 'vcard must begin with the line BEGIN:VCARD'));
      assert.deepEqual(
        (await send(`NOTE:x\n${VCARD}`)).body,
        bad(400, 'vcard must begin with the line BEGIN:VCARD'),
      );
      assert.deepEqual(
        (await send(`${VCARD}\nTEL:+5511977776666`)).body,
        bad(400, 'vcard must end with the line END:VCARD'),
      );
      const two = `${VCARD}\n${VCARD}`;
      assert.deepEqual(
        (await send(two)).body,
        bad(400, 'vcard must hold one card: one BEGIN:VCARD and one END:VCARD'),
      );
      assert.equal((await send(`\n${VCARD}\n\n`)).status, 200, 'blank lines around the card');
    });
  });
}
