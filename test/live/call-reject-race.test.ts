/**
 * Two concurrent POST /v1/calls/{id}/reject of one ringing call on the live engine. docs/decisions/0041:
 * "a second reject of the same call is a conflict" (409), and each step of a call is one `Call` event.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator } from './support.ts';

const shop = '5541999990000';
const ana = '5541988887777';

for (const dialect of testDialects()) {
  describe(`live engine: concurrent rejects of one ringing call (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
      ]) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      const subscribed = await app.live('POST', '/v1/session/connect', { subscribe: ['Call'] });
      assert.equal(subscribed.status, 200, JSON.stringify(subscribed.body));
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('one reject wins (200), the other is 409, and one rejected Call event is recorded', async () => {
      const call = await control(sim, 'POST', `/users/${ana}/call`, { to: shop });
      assert.equal(call.status, 201, JSON.stringify(call.body));
      const id = call.body.id as string;
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Call' && b.event.callId === id && b.event.status === 'offer',
        'the Call offer webhook',
      );
      const answers = await Promise.all([
        app.live('POST', `/v1/calls/${id}/reject`),
        app.live('POST', `/v1/calls/${id}/reject`),
      ]);
      const rows = await app.t.services.store.db
        .selectFrom('webhook_events')
        .select(['payload'])
        .where('instance_id', '=', app.instanceId)
        .where('type', '=', 'Call')
        .execute();
      const rejected = rows
        .map((row) => JSON.parse(row.payload))
        .filter((b) => b.event.callId === id && b.event.status === 'rejected');
      assert.deepEqual(
        answers.map((a) => a.status).sort(),
        [200, 409],
        `answers: ${JSON.stringify(answers.map((a) => a.body))}`,
      );
      assert.equal(rejected.length, 1, 'rejected Call events recorded');
    });
  });
}
