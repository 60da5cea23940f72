/**
 * A group notification the platform hands over again (docs/decisions/0024-engines-and-data-flow.md: what the platform
 * hands over again is recorded once). The account's acknowledgements are lost on the way (`lose-acks`), so when its
 * socket closes the platform puts every stanza of the connection, notifications included, back into the device's
 * offline queue and hands it over again at the next login. Before, a member's change of the group's subject came back
 * as a second `GroupUpdate` webhook. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, waitForStatus } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: a group notification handed over again after lost acknowledgements (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990110';
    const ana = '5541988887110';

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop, ['Message', 'GroupUpdate']);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it("a member's change of the subject comes again at the next login: one GroupUpdate", async () => {
      const made = await control(sim, 'POST', '/groups', {
        creator: ana,
        subject: 'Club',
        participants: [shop],
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const groupJid = made.body.jid as string;

      // From here the account's acknowledgements are lost: every stanza of this connection comes again.
      assert.equal((await control(sim, 'POST', '/faults', { phone: shop, kind: 'lose-acks' })).status, 200);
      const renamed = await control(sim, 'POST', `/groups/${groupJid}`, { actor: ana, subject: 'Club 2' });
      assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
      const isRename = (b: any) =>
        b.type === 'GroupUpdate' && b.event.groupJid === groupJid && b.event.name === 'Club 2';
      await waitForWebhook(receiver, isRename, 'the new subject');

      // The session goes offline; a marker waits in the device's offline queue behind the notification, which the
      // platform hands over again, in order, at the next login: once the marker is recorded, so is it.
      assert.equal((await app.live('POST', '/v1/session/disconnect')).status, 200);
      await waitForStatus(app, false, true);
      const marker = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'marker' });
      assert.equal(marker.status, 201, JSON.stringify(marker.body));
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === marker.body.id,
        'the marker, handed over after the notification',
      );

      const renames = bodies(receiver.requests).filter(isRename);
      assert.equal(renames.length, 1, JSON.stringify(renames.map((b: any) => b.sequence)));
      const logged = await app.t.services.store.db
        .selectFrom('webhook_events')
        .select('payload')
        .where('type', '=', 'GroupUpdate')
        .execute();
      assert.equal(logged.filter((row) => isRename(JSON.parse(row.payload))).length, 1, 'the event log');
    });
  });
}
