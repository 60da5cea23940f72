/**
 * Chat presence and read receipts addressed to a number the platform does not know, with a live key against the
 * platform simulator: answered `422 recipient <phone> is not registered on the platform` as a send is, and as the
 * sandbox answers them (test/messages/updates.test.ts, test/messages/react-read.test.ts), from the registration
 * cache (docs/api.md#post-v1chatspresence, docs/api.md#post-v1messagesread). Before, the live engine sent them to
 * the platform and answered 200. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: presence and read receipts to an unregistered number (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    const shop = '5541999991000';
    const ana = '5541988881000';
    const nobody = '5541977771000';
    const notRegistered = {
      error: { code: 422, message: `recipient ${nobody} is not registered on the platform` },
    };

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop });
      await control(sim, 'POST', '/users', { phone: ana });
      await control(sim, 'POST', '/users', { phone: nobody, registered: false });
      await pairLive(sim, app, shop);
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('presence to an unregistered number answers 422, every state; a registered one 200', async () => {
      for (const state of ['composing', 'recording', 'paused', 'available', 'unavailable']) {
        const answer = await app.live('POST', '/v1/chats/presence', { phone: nobody, state });
        assert.equal(answer.status, 422, `${state}: ${JSON.stringify(answer.body)}`);
        assert.deepEqual(answer.body, notRegistered);
      }
      const ok = await app.live('POST', '/v1/chats/presence', { phone: ana, state: 'composing' });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
    });

    it('read receipts to an unregistered number answer 422; a registered one 200', async () => {
      const answer = await app.live('POST', '/v1/messages/read', {
        chatPhone: nobody,
        id: ['3A0000000000000001'],
      });
      assert.equal(answer.status, 422, JSON.stringify(answer.body));
      assert.deepEqual(answer.body, notRegistered);
      const ok = await app.live('POST', '/v1/messages/read', { chatPhone: ana, id: ['3A0000000000000001'] });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
    });

    it('a reaction to an unregistered number answers 422 as well', async () => {
      const answer = await app.live('POST', '/v1/messages/react', { phone: nobody, id: 'ABC', body: '👍' });
      assert.equal(answer.status, 422, JSON.stringify(answer.body));
      assert.deepEqual(answer.body, notRegistered);
    });
  });
}
