/**
 * A group member parley learned the phone↔LID pair of (stored in `lid_mappings`) reads a message after parley
 * restarted, with a live key against the platform simulator: the platform names the reader by LID, and the
 * `ReadReceipt` names them by phone JID, with no `lidUnresolved`, because the live engine's resolver asks parley's
 * kept pairs when its memory (empty after a restart or a hand-over) and Baileys' mapping store do not know the LID
 * (docs/decisions/0038-lid-mappings.md, docs/decisions/0025-live-engine.md). Before, the payload named the LID while
 * the store held the pair. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { waitForWebhook } from './observe.ts';
import {
  companion,
  control,
  liveApp,
  pairLive,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: a group member's pair after a restart (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    const shop = '5511999990600';
    const carla = '5511966665600';
    const dora = '5511955554600';

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      for (const phone of [shop, carla, dora]) await control(sim, 'POST', '/users', { phone });
    });
    after(async () => {
      await receiver.close();
      await sim.close();
    });

    it("a member's read receipt after parley restarted names the member by phone JID", async () => {
      const testStore = await createTestStore(dialect);
      try {
        const first = await liveApp(sim, { testStore });
        await pairLive(sim, first, shop, ['Message', 'ReadReceipt']);
        assert.equal((await first.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
        const group = await control(sim, 'POST', '/groups', {
          creator: carla,
          subject: 'Suppliers',
          participants: [shop, dora],
        });
        assert.equal(group.status, 201, JSON.stringify(group.body));
        const groupJid: string = group.body.jid;
        const doraLid: string = group.body.participants.find((p: { phone: string }) => p.phone === dora)?.lid;
        assert.ok(doraLid, JSON.stringify(group.body));
        const sent = await first.live('POST', '/v1/messages/send', { phone: groupJid, body: 'hello group' });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        const id: string = sent.body.data.id;
        await until('at Dora', () => sim.context.accounts.get(dora)?.inbox.find((e) => e.id === id));
        // The send's group metadata taught the pair, and the store keeps it.
        const kept = await until('the pair stored', () =>
          testStore.store.db
            .selectFrom('lid_mappings')
            .select(['lid', 'phone'])
            .where('instance_id', '=', first.instanceId)
            .where('phone', '=', dora)
            .executeTakeFirst(),
        );
        assert.equal(`${kept.lid}@lid`, doraLid.includes('@') ? doraLid : `${doraLid}@lid`);
        await first.t.close();
        await until('the first process gone', async () =>
          (await companion(sim, shop)).sockets === 0 ? true : undefined,
        );

        const second = await liveApp(sim, {
          testStore,
          existing: { instanceId: first.instanceId, liveKey: first.liveKey },
        });
        try {
          assert.equal(await second.t.services.sessions.restoreAll(), 1);
          await waitForStatus(second, true, true);
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
            (b) => b.type === 'ReadReceipt' && b.event.messageIds.includes(id),
            "Dora's read receipt",
          );
          assert.deepEqual(body.event.messageSource, {
            chat: groupJid,
            sender: `${dora}@s.whatsapp.net`,
            isFromMe: false,
            isGroup: true,
          });
        } finally {
          await second.t.close();
        }
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
