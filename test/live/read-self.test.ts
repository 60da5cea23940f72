/**
 * The account reads a received message on its phone, with a live key against the platform simulator: the phone's
 * `read-self` receipt moves the stored message to `read` and raises no `ReadReceipt` (decision 0018: receipts from
 * others only; docs/api.md#webhook-events: a recipient's device received, read or played messages you sent). Before,
 * it reached webhooks as a `ReadReceipt` with `isFromMe: true`. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sendToAccount } from '../../sim/control/messaging.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: the account reads on its phone (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990500';
    const ana = '5541988887500';

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      // The default subscription: Message, ReadReceipt, HistorySync, ChatPresence.
      await pairLive(sim, app, shop);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('a read-self receipt moves the message to read and raises no ReadReceipt', async () => {
      const said = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'hi' });
      assert.equal(said.status, 201, JSON.stringify(said.body));
      const id: string = said.body.id;
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, 'the message');
      const account = sim.context.accounts.get(shop);
      assert.ok(account);
      const sockets = sendToAccount(account, () => ({
        tag: 'receipt',
        attrs: {
          from: `${shop}@s.whatsapp.net`,
          recipient: `${ana}@s.whatsapp.net`,
          id,
          t: String(Math.floor(Date.now() / 1000)),
          type: 'read-self',
        },
      }));
      assert.equal(sockets, 1);
      await until('the message read', async () =>
        (await messageRow(app, id))?.state === 'read' ? true : undefined,
      );
      // A later message from Ana: once its event is stored, the receipt's would be too.
      const later = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'later' });
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === later.body.id,
        'later',
      );
      const events = await app.t.services.store.db
        .selectFrom('webhook_events')
        .select(['type', 'sequence'])
        .where('instance_id', '=', app.instanceId)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        events.filter((event) => ['Message', 'ReadReceipt'].includes(event.type)).map((event) => event.type),
        ['Message', 'Message'],
      );
    });
  });
}
