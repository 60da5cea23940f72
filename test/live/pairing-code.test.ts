/**
 * Linking by code through parley's HTTP API against the platform simulator: POST /v1/session/pairing-code makes
 * Baileys (the live engine) send companion_hello; the simulated phone "types" the code (POST
 * /control/pairing-code), the link-code exchange derives the ADV secret on both sides, and the device logs in as
 * after a QR scan. A wrong code is refused without linking anything. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, startTestSimulator, until, waitForStatus } from './support.ts';

/** A wrong code of the right shape: `code` with its first character changed. */
function wrong(code: string): string {
  return `${code[0] === 'A' ? 'B' : 'A'}${code.slice(1)}`;
}

for (const dialect of testDialects()) {
  describe(`pairing by code through the live API against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    const shop = '5511999990000';
    const ana = '5511988887777';

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('no companion asked yet: entering a code on the phone is 404; a malformed code is 400', async () => {
      assert.deepEqual(await control(sim, 'POST', '/pairing-code', { phone: shop, code: 'AB12' }), {
        status: 400,
        body: { error: { code: 400, message: 'code: must NOT have fewer than 8 characters' } },
      });
      assert.deepEqual(await control(sim, 'POST', '/pairing-code', { phone: shop, code: 'ABCD1234' }), {
        status: 404,
        body: {
          error: {
            code: 404,
            message: `phone: no companion is waiting to link to ${shop} by code (expired or closed)`,
          },
        },
      });
    });

    it('pairing-code → a wrong code is refused and links nothing → the right code links and logs in', async () => {
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      const requested = await app.live('POST', '/v1/session/pairing-code', { phone: shop });
      assert.equal(requested.status, 200, JSON.stringify(requested.body));
      const code: string = requested.body.data.code;
      assert.match(code, /^[0-9A-Z]{8}$/);

      const bad = await until('the companion_hello at the simulator', async () => {
        const answer = await control(sim, 'POST', '/pairing-code', { phone: shop, code: wrong(code) });
        return answer.status === 404 ? undefined : answer;
      });
      assert.deepEqual(bad, {
        status: 409,
        body: {
          error: {
            code: 409,
            message: 'code: wrong code (the companion key bundle does not decrypt with it)',
          },
        },
      });
      assert.deepEqual((await control(sim, 'GET', `/accounts/${shop}`)).body.devices, [
        { id: 0, linked: true, sockets: 0 },
      ]);
      const pending = await app.status();
      assert.equal(pending.loggedIn, false);

      const typed = `${code.slice(0, 4)}-${code.slice(4).toLowerCase()}`;
      const linked = await control(sim, 'POST', '/pairing-code', { phone: shop, code: typed });
      assert.equal(linked.status, 200, JSON.stringify(linked.body));
      assert.equal(linked.body.jid, `${shop}:1@s.whatsapp.net`);
      assert.equal(linked.body.device, 1);
      const state = await waitForStatus(app, true, true);
      assert.equal(state.jid, `${shop}:1@s.whatsapp.net`);

      const sent = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'Linked by code' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const entry = await until('the text in the inbox', () =>
        sim.context.accounts.get(ana)?.inbox.find((e) => e.id === sent.body.data.id),
      );
      assert.equal(entry.text, 'Linked by code');
    });

    it('the code is used up once linked', async () => {
      assert.equal(
        (await control(sim, 'POST', '/pairing-code', { phone: shop, code: 'ABCD1234' })).status,
        404,
      );
    });
  });
}
