/**
 * An edit or a deletion for everyone that arrives from someone who did not send the message. The platform
 * relays any `protocolMessage` a user's phone builds; WhatsApp's apps (and Baileys' own processMessage, which keys
 * the update by the chat the protocolMessage came in) apply an edit or a revoke only to the sender's own message
 * in that chat. parley applies it to whatever stored message has that id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { proto } from 'baileys';
import { sendMessage } from '../../sim/messaging/send.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { messageRow, waitForWebhook } from './observe.ts';
import {
  control,
  type LiveApp,
  liveApp,
  pairLive,
  simulatedUser,
  startTestSimulator,
  until,
} from './support.ts';

const Types = proto.Message.ProtocolMessage.Type;

for (const dialect of testDialects()) {
  describe(`live engine: edits and deletions from someone who did not send the message (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5541999990000';
    const ana = '5541988887777';
    const bia = '5541977776666';
    const shopJid = `${shop}@s.whatsapp.net`;

    const user = (phone: string) => simulatedUser(sim, phone);
    /** User `from` sends the account a raw protocolMessage of `type` naming message `id`. */
    const forge = (from: string, id: string, type: proto.Message.ProtocolMessage.Type, text?: string) =>
      sendMessage(sim.context.signalQueue, user(from), user(shop), {
        protocolMessage: {
          key: { remoteJid: shopJid, fromMe: true, id },
          type,
          ...(text === undefined ? {} : { editedMessage: { conversation: text } }),
          timestampMs: Date.now(),
        },
      });

    /** The recorded MessageUpdate events naming message `id`. */
    const updatesOf = async (id: string) => {
      const rows = await app.t.services.store.db
        .selectFrom('webhook_events')
        .select(['payload'])
        .where('instance_id', '=', app.instanceId)
        .where('type', '=', 'MessageUpdate')
        .execute();
      return rows.map((row) => JSON.parse(row.payload).event).filter((e) => e.messageId === id);
    };

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await control(sim, 'POST', '/users', { phone: bia, pushName: 'Bia' });
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, shop, ['Message', 'MessageUpdate']);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('a third user cannot delete, in parley’s store, a message Ana sent in her own chat', async () => {
      const said = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'my order is 42' });
      assert.equal(said.status, 201, JSON.stringify(said.body));
      const id = said.body.id as string;
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, 'Ana’s message');
      await forge(bia, id, Types.REVOKE);
      // A marker after the forged revoke: once it is recorded, the revoke was handled too (one serial queue).
      const marker = await control(sim, 'POST', '/messages', { from: bia, to: shop, text: 'marker 1' });
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === marker.body.id,
        'the marker',
      );
      const content = JSON.parse((await messageRow(app, id))?.content ?? '{}');
      assert.equal(content.deletedAt, undefined, 'Bia deleted Ana’s message in parley’s store');
      assert.equal(content.text, 'my order is 42');
      assert.deepEqual(await updatesOf(id), [], 'a MessageUpdate webhook reports Bia deleting Ana’s message');
    });

    it('a recipient cannot edit or delete, in parley’s store, a message the account sent', async () => {
      const sent = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'total: 10 USD' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id = sent.body.data.id as string;
      await until('Ana got it', () => user(ana).inbox.find((e) => e.id === id));
      await forge(ana, id, Types.MESSAGE_EDIT, 'total: 0 USD');
      const marker = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'marker 2' });
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === marker.body.id,
        'the marker',
      );
      const content = JSON.parse((await messageRow(app, id))?.content ?? '{}');
      assert.equal(content.text, 'total: 10 USD', 'Ana rewrote the account’s own message in parley’s store');
      await forge(ana, id, Types.REVOKE);
      const marker3 = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'marker 3' });
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === marker3.body.id,
        'the marker',
      );
      // The account can still delete its own message for everyone: it was never deleted on the platform.
      assert.deepEqual(
        await updatesOf(id),
        [],
        'MessageUpdate webhooks report Ana changing the account’s message',
      );
      const del = await app.live('POST', '/v1/messages/delete', { phone: ana, id });
      assert.equal(del.status, 200, JSON.stringify(del.body));
    });

    it('an edit after the sender deleted the message is ignored: the message stays deleted', async () => {
      const said = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'pin 1234' });
      const id = said.body.id as string;
      await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === id, 'the message');
      assert.equal((await control(sim, 'POST', '/messages/delete', { from: ana, to: shop, id })).status, 201);
      await waitForWebhook(
        receiver,
        (b) => b.type === 'MessageUpdate' && b.event.kind === 'delete' && b.event.messageId === id,
        'the delete',
      );
      const edit = await control(sim, 'POST', '/messages/edit', {
        from: ana,
        to: shop,
        id,
        text: 'pin 5678',
      });
      assert.equal(edit.status, 201, JSON.stringify(edit.body));
      const marker = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'marker 4' });
      await waitForWebhook(
        receiver,
        (b) => b.type === 'Message' && b.event.info.id === marker.body.id,
        'the marker',
      );
      const content = JSON.parse((await messageRow(app, id))?.content ?? '{}');
      assert.ok(content.deletedAt);
      assert.equal(content.text, undefined, 'the deleted message shows the edited text');
      assert.deepEqual(
        (await updatesOf(id)).map((e) => e.kind),
        ['delete'],
      );
    });
  });
}
