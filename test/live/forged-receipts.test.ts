/**
 * Receipts naming messages of another chat (docs/decisions/0017-messages-and-media.md: a message's state is updated
 * from its recipients' receipts): the platform relays a receipt naming any message id, from anyone; the stored state
 * moves only for the messages of the receipt's chat and of the side it acknowledges, as on a phone
 * (src/events/message-projection.ts). Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { messageRow } from './observe.ts';
import {
  control,
  type LiveApp,
  liveApp,
  pairLive,
  simulatedUser,
  startTestSimulator,
  until,
} from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: receipts from another chat (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    const shop = '5541999990100';
    const ana = '5541988887100';
    const bia = '5541977776100';

    const user = (phone: string) => simulatedUser(sim, phone);
    /** The recorded events of `type`, parsed, in sequence order. */
    const eventsOf = async (type: string) => {
      const rows = await app.t.services.store.db
        .selectFrom('webhook_events')
        .select(['payload', 'sequence'])
        .where('instance_id', '=', app.instanceId)
        .where('type', '=', type)
        .orderBy('sequence')
        .execute();
      return rows.map((row) => JSON.parse(row.payload));
    };
    const messagesWithId = async (id: string) =>
      (await eventsOf('Message')).filter((b) => b.event.info.id === id);
    /** Waits until a Message event with `id` is recorded. */
    const recorded = (id: string) =>
      until(`message ${id} recorded`, async () => ((await messagesWithId(id)).length > 0 ? true : undefined));
    /** A marker message from `from`: once recorded, everything the queue got before it was handled. */
    const marker = async (from: string) => {
      const said = await control(sim, 'POST', '/messages', {
        from,
        to: shop,
        text: `marker ${Math.random()}`,
      });
      assert.equal(said.status, 201, JSON.stringify(said.body));
      await recorded(said.body.id);
    };

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await control(sim, 'POST', '/users', { phone: bia, pushName: 'Bia' });
      await pairLive(sim, app, shop, ['Message', 'ReadReceipt']);
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('a read receipt from Bia naming a message the account sent Ana does not mark it read', async () => {
      const sent = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'your invoice' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id = sent.body.data.id as string;
      await until('Ana got it', () => user(ana).inbox.find((e) => e.id === id));
      const r = await control(sim, 'POST', '/receipts', { from: bia, to: shop, ids: [id], type: 'read' });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      await marker(bia);
      assert.equal(
        (await messageRow(app, id))?.state,
        'sent',
        'Bia marked the account’s message to Ana read',
      );
    });

    it('a group member’s read receipt naming a 1:1 message of the account does not mark it read', async () => {
      const made = await control(sim, 'POST', '/groups', {
        creator: bia,
        subject: 'club',
        participants: [shop],
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const sent = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'private offer' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id = sent.body.data.id as string;
      await until('Ana got it', () => user(ana).inbox.find((e) => e.id === id));
      const r = await control(sim, 'POST', '/receipts', {
        from: bia,
        to: shop,
        ids: [id],
        type: 'read',
        groupJid: made.body.jid,
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      await marker(bia);
      assert.equal((await messageRow(app, id))?.state, 'sent', 'a group receipt marked a 1:1 message read');
    });
  });
}
