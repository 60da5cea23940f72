/**
 * A member of a group another user created, whom the account never wrote to one to one, reads a text parley sent to
 * the group: the platform names the reader by LID, and the group metadata fetched for the send carried the member's
 * number (`phone_number`). The `ReadReceipt` names the member by phone JID and the pair is stored
 * (docs/decisions/0038-lid-mappings.md). Before, Baileys fetched that metadata itself (parley's group cache missed)
 * and only parley's own group reads taught the resolver, so the receipt named the member by LID, flagged
 * `lidUnresolved`, until a `GET /v1/groups/info`. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: a group member known only through the group (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5511999990000';
    const carla = '5511966665555';
    const dora = '5511955554444';

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const phone of [shop, carla, dora]) await control(sim, 'POST', '/users', { phone });
      await pairLive(sim, app, shop, ['Message', 'ReadReceipt']);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it("the member's read receipt of a text parley sent to the group names them by phone JID", async () => {
      const group = await control(sim, 'POST', '/groups', {
        creator: carla,
        subject: 'Suppliers',
        participants: [shop, dora],
      });
      assert.equal(group.status, 201, JSON.stringify(group.body));
      const groupJid: string = group.body.jid;
      const doraLid = group.body.participants.find((p: { phone: string }) => p.phone === dora)?.lid;
      assert.ok(doraLid, JSON.stringify(group.body));
      const sent = await app.live('POST', '/v1/messages/send', { phone: groupJid, body: 'hello group' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id = sent.body.data.id;
      await until('at Dora', () => sim.context.accounts.get(dora)?.inbox.find((e) => e.id === id));
      const read = await control(sim, 'POST', '/receipts', {
        from: dora,
        to: shop,
        ids: [id],
        type: 'read',
        groupJid,
      });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const { body } = await waitForWebhook(
        receiver,
        (b) => b.type === 'ReadReceipt' && b.state === 'Read' && b.event.messageIds.includes(id),
        'the read receipt',
      );
      assert.deepEqual(body.event.messageSource, {
        chat: groupJid,
        sender: `${dora}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: true,
      });
      assert.equal((await messageRow(app, id))?.state, 'read');
      const pair = await app.t.services.store.db
        .selectFrom('lid_mappings')
        .select(['lid', 'phone'])
        .where('instance_id', '=', app.instanceId)
        .where('phone', '=', dora)
        .executeTakeFirst();
      assert.deepEqual(pair, { lid: doraLid, phone: dora }, 'the pair the metadata carried is stored');
    });
  });
}
