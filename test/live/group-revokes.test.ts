/**
 * Deletions for everyone in a group (docs/decisions/0026-chats-edits-polls-and-calls.md): a member deletes their own
 * message; a group admin deletes another member's; a member who is not an admin cannot, as a phone ignores such a
 * deletion. Before, parley's store took a deletion of another member's message from any member of the group.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { proto } from 'baileys';
import { sendGroupText } from '../../sim/control/groups.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, simulatedUser, startTestSimulator } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: deletions in a group by the sender, an admin and a plain member (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    let groupJid: string;
    const shop = '5541999990800';
    const carla = '5541966660800';
    const ana = '5541988880800';
    const bia = '5541977770800';

    const user = (phone: string) => simulatedUser(sim, phone);
    /** Member `from` deletes for everyone message `id` that `sender` sent to the group. */
    const revoke = (from: string, sender: string, id: string) =>
      sendGroupText(sim.context, user(from), groupJid, {
        protocolMessage: {
          key: { remoteJid: groupJid, fromMe: from === sender, id, participant: `${sender}@s.whatsapp.net` },
          type: proto.Message.ProtocolMessage.Type.REVOKE,
        },
      });
    /** Ana's message `text` to the group, once recorded. */
    const anaSays = async (text: string) => {
      const said = await control(sim, 'POST', '/messages', { from: ana, to: shop, text, groupJid });
      assert.equal(said.status, 201, JSON.stringify(said.body));
      const id = said.body.id as string;
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, text);
      return id;
    };
    /** Waits for a marker sent after an update: the engine handles the group's messages in order. */
    const marker = async (text: string) => {
      const sent = await control(sim, 'POST', '/messages', { from: bia, to: shop, text, groupJid });
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === sent.body.id, text);
    };
    const updatesOf = (id: string) =>
      bodies(receiver.requests).filter((b) => b.type === 'MessageUpdate' && b.event.messageId === id);

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const phone of [shop, carla, ana, bia]) await control(sim, 'POST', '/users', { phone });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop, ['Message', 'MessageUpdate']);
      // Carla creates the group: she is its (super) admin; the others are plain members.
      const group = await control(sim, 'POST', '/groups', {
        creator: carla,
        subject: 'Orders',
        participants: [shop, ana, bia],
      });
      assert.equal(group.status, 201, JSON.stringify(group.body));
      groupJid = group.body.jid;
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('a member who is not an admin deletes another member’s message: nothing changes, no webhook', async () => {
      const id = await anaSays('order 42');
      await revoke(bia, ana, id);
      await marker('marker 1');
      const content = JSON.parse((await messageRow(app, id))?.content ?? '{}');
      assert.equal(
        content.deletedAt,
        undefined,
        'Bia, not an admin, deleted Ana’s message in parley’s store',
      );
      assert.equal(content.text, 'order 42');
      assert.deepEqual(updatesOf(id), []);
    });

    it('the group admin deletes another member’s message: deleted, a MessageUpdate naming the admin', async () => {
      const id = await anaSays('order 43');
      await revoke(carla, ana, id);
      const { body } = await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.messageId === id,
        'the admin’s deletion',
      );
      assert.equal(body.event.kind, 'delete');
      assert.equal(body.event.messageSource.sender, `${carla}@s.whatsapp.net`);
      assert.equal(body.event.messageSource.isGroup, true);
      const content = JSON.parse((await messageRow(app, id))?.content ?? '{}');
      assert.ok(content.deletedAt);
      assert.equal(content.text, undefined);
    });

    it('a member deletes their own message: deleted', async () => {
      const id = await anaSays('order 44');
      const del = await control(sim, 'POST', '/messages/delete', { from: ana, to: shop, id, groupJid });
      assert.equal(del.status, 201, JSON.stringify(del.body));
      await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.messageId === id,
        'Ana’s own deletion',
      );
      assert.ok(JSON.parse((await messageRow(app, id))?.content ?? '{}').deletedAt);
    });
  });
}
