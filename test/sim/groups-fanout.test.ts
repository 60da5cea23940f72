/**
 * Sender-key fan-out between several linked accounts: two real Baileys 7 clients and a phone-only member in one
 * group. Each sender's key reaches the other account's device (forwarded by the simulator with the skmsg in one
 * group stanza) and the phone; everyone decrypts everyone.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { WAMessage } from 'baileys';
import type { Simulator } from '../../sim/simulator.ts';
import {
  type Client,
  control,
  endClient,
  pairClient,
  startTrustedSimulator,
  until,
  waitForEvent,
} from './support.ts';

describe('simulator: a group of two Baileys accounts and a phone-only member', () => {
  let sim: Simulator;
  let alice: Client;
  let bob: Client;
  const a = '4930200000001';
  const b = '4930200000002';
  const c = '4930200000003';
  // Baileys keys group messages by the sender's user JID (the stanza names the sending device).
  const lid = (phone: string) => `${sim.context.accounts.get(phone)?.lid}@lid`;
  const text = (m: WAMessage) => m.message?.conversation ?? m.message?.extendedTextMessage?.text;
  const receivedBy = (client: Client, body: string) =>
    waitForEvent(client, 'messages.upsert', (u) => u.messages.some((m) => text(m) === body), body).then(
      (u) => u.messages.find((m) => text(m) === body) as WAMessage,
    );

  before(async () => {
    sim = await startTrustedSimulator();
    for (const phone of [a, b, c])
      await control(sim, 'POST', '/users', { phone, pushName: `U${phone.slice(-1)}` });
    alice = await pairClient(sim, a);
    bob = await pairClient(sim, b);
  });
  after(async () => {
    await endClient(alice);
    await endClient(bob);
    await sim.close();
  });

  it('each sender’s key reaches the other account’s device and the phone; everyone decrypts everyone', async () => {
    const announced = waitForEvent(bob, 'groups.upsert', (metas) => metas.length > 0, 'the create at Bob');
    const group = await alice.sock.groupCreate('Trio', [`${b}@s.whatsapp.net`, `${c}@s.whatsapp.net`]);
    assert.equal((await announced)[0]?.id, group.id);

    const atBob = receivedBy(bob, 'from Alice’s companion');
    const sent = await alice.sock.sendMessage(group.id, { text: 'from Alice’s companion' });
    const got = await atBob;
    assert.deepEqual(
      {
        remoteJid: got.key.remoteJid,
        participant: got.key.participant,
        fromMe: got.key.fromMe,
        id: got.key.id,
      },
      { remoteJid: group.id, participant: lid(a), fromMe: false, id: sent?.key.id },
    );
    await until('Alice’s text at C', () =>
      sim.context.accounts.get(c)?.inbox.find((e) => e.id === sent?.key.id && e.group === group.id),
    );

    const atAlice = receivedBy(alice, 'from Bob’s companion');
    const fromBob = await bob.sock.sendMessage(group.id, { text: 'from Bob’s companion' });
    assert.equal((await atAlice).key.participant, lid(b));
    const atC = await until('Bob’s text at C', () =>
      sim.context.accounts.get(c)?.inbox.find((e) => e.id === fromBob?.key.id),
    );
    assert.deepEqual([atC.from, atC.fromDevice, atC.text], [b, 1, 'from Bob’s companion']);

    const both = [receivedBy(alice, 'from the phone'), receivedBy(bob, 'from the phone')];
    const fromC = await control(sim, 'POST', '/messages', {
      from: c,
      to: a,
      groupJid: group.id,
      text: 'from the phone',
    });
    assert.deepEqual({ ...(fromC.body as object), id: '' }, { id: '', devices: 2, online: 2 });
    for (const message of await Promise.all(both)) {
      assert.equal(message.key.remoteJid, group.id);
      assert.equal(message.key.participant, lid(c));
    }
  });
});
