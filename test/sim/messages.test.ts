import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { USyncQuery, USyncUser, type WAMessage } from 'baileys';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import {
  type Client,
  connectClient,
  control,
  endClient,
  inboxEntry,
  pairClient,
  startTrustedSimulator,
  waitForEvent,
  waitForUpdate,
} from './support.ts';

function received(client: Client, text: string): Promise<WAMessage> {
  return waitForEvent(
    client,
    'messages.upsert',
    (u) => u.messages.some((m) => (m.message?.conversation ?? m.message?.extendedTextMessage?.text) === text),
    `"${text}" at Baileys`,
  ).then((u) => {
    const message = u.messages.find(
      (m) => (m.message?.conversation ?? m.message?.extendedTextMessage?.text) === text,
    );
    if (!message) throw new Error('unreachable');
    return message;
  });
}

describe('simulator: Signal-encrypted 1:1 messages with a real Baileys client', () => {
  let sim: Simulator;
  let client: Client;
  const account = '4930111111111';
  const friend = '4930222222222';
  before(async () => {
    sim = await startTrustedSimulator();
    await control(sim, 'POST', '/users', { phone: account, pushName: 'Account' });
    await control(sim, 'POST', '/users', { phone: friend, pushName: 'Friend' });
    client = await pairClient(sim, account);
  });
  after(async () => {
    await endClient(client);
    await sim.close();
  });

  let fromFriend: WAMessage;

  it('a user sends a text (pkmsg, then msg): Baileys decrypts both', async () => {
    const first = received(client, 'hello from the phone');
    const sent = await control(sim, 'POST', '/messages', {
      from: friend,
      to: account,
      text: 'hello from the phone',
    });
    assert.equal(sent.status, 201);
    const { id } = sent.body as { id: string };
    assert.match(id, /^[0-9A-F]{32}$/);
    assert.deepEqual(sent.body, { id, devices: 1, online: 1 });
    fromFriend = await first;
    assert.equal(fromFriend.key.id, id);
    assert.equal(fromFriend.key.fromMe, false);
    assert.equal(fromFriend.pushName, 'Friend');
    const second = received(client, 'and a second one');
    await control(sim, 'POST', '/messages', { from: friend, to: account, text: 'and a second one' });
    await second;
  });

  it('Baileys sends a text: the user decrypts it; the DSM copy to the own phone decrypts too', async () => {
    const errors: unknown[] = [];
    sim.context.events.on('decrypt-error', (e) => errors.push(e));
    const sentCopy = new Promise<{ id: string }>((resolve) => sim.context.events.once('sent', resolve));
    const inbox = inboxEntry(sim, friend, (e) => e.text === 'hi back', 'the text');
    const sent = await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { text: 'hi back' });
    const entry = await inbox;
    assert.equal(entry.id, sent?.key.id);
    assert.equal(entry.from, account);
    assert.equal(entry.fromDevice, 1);
    assert.equal(entry.type, 'text');
    assert.equal((await sentCopy).id, sent?.key.id);
    assert.deepEqual(errors, [], 'the pkmsg carried a device identity the account signed');
  });

  it('a reply carries the quoted id; a reaction names the message; read marks arrive as receipts', async () => {
    const reply = inboxEntry(sim, friend, (e) => e.text === 'a reply', 'the reply');
    await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { text: 'a reply' }, { quoted: fromFriend });
    assert.equal((await reply).quotedId, fromFriend.key.id);

    const reaction = inboxEntry(sim, friend, (e) => e.type === 'reaction', 'the reaction');
    await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { react: { text: '👍', key: fromFriend.key } });
    assert.deepEqual((await reaction).reaction, { id: fromFriend.key.id, text: '👍' });

    const read = inboxEntry(
      sim,
      friend,
      (e) => e.type === 'receipt' && e.receipt === 'read',
      'the read receipt',
    );
    await client.sock.readMessages([fromFriend.key]);
    assert.deepEqual((await read).ids, [fromFriend.key.id]);

    const inbox = await control(sim, 'GET', `/users/${friend}/inbox`);
    assert.equal(inbox.status, 200);
    const types = (inbox.body as InboxEntry[]).map((e) => e.type);
    assert.ok(
      types.includes('text') && types.includes('reaction') && types.includes('receipt'),
      types.join(),
    );
  });

  it('a message sent while the device is offline is delivered at its next login', async () => {
    await endClient(client);
    const sent = await control(sim, 'POST', '/messages', {
      from: friend,
      to: account,
      text: 'while you were away',
    });
    assert.equal((sent.body as { online: number }).online, 0);
    client = connectClient(sim, client.auth);
    const arrived = received(client, 'while you were away');
    await waitForUpdate(client, (u) => u.connection === 'open', 'open');
    await arrived;
  });

  it('a device that lost its session asks for a retry; the user resends in a fresh session', async () => {
    for (const key of [...client.auth.data.keys()])
      if (key.startsWith('session:')) client.auth.data.delete(key);
    const retried = new Promise<{ count: number }>((resolve) => sim.context.events.once('retry', resolve));
    const arrived = received(client, 'after a lost session');
    await control(sim, 'POST', '/messages', { from: friend, to: account, text: 'after a lost session' });
    assert.equal((await retried).count, 1);
    await arrived;
  });

  it('usync: contact lookups find registered numbers only; devices and LID of an account', async () => {
    await control(sim, 'POST', '/users', { phone: '4930333333333', registered: false });
    const found = await client.sock.onWhatsApp(friend, '4930333333333', '4930444444444');
    // Baileys keeps only the numbers the platform answers `in` for: the unregistered and the unknown are absent.
    assert.deepEqual(found, [{ jid: `${friend}@s.whatsapp.net`, exists: true }]);
    const devices = await client.sock.executeUSyncQuery(
      new USyncQuery()
        .withDeviceProtocol()
        .withLIDProtocol()
        .withUser(new USyncUser().withId(`${account}@s.whatsapp.net`)),
    );
    const [row] = devices?.list ?? [];
    assert.deepEqual(
      (row?.devices as { deviceList: { id: number }[] } | undefined)?.deviceList.map((d) => d.id),
      [0, 1],
      'the phone and the linked companion',
    );
    assert.equal(row?.lid, `${sim.context.accounts.get(account)?.lid}@lid`);
  });

  it('errors: unknown sender 404, unknown group 404, account without devices 409', async () => {
    assert.deepEqual(
      await control(sim, 'POST', '/messages', { from: '4930999999999', to: account, text: 'x' }),
      {
        status: 404,
        body: { error: { code: 404, message: 'from: no simulated user with phone 4930999999999' } },
      },
    );
    assert.deepEqual(
      await control(sim, 'POST', '/messages', { from: friend, to: account, text: 'x', groupJid: '1@g.us' }),
      { status: 404, body: { error: { code: 404, message: 'groupJid: no simulated group 1@g.us' } } },
    );
    assert.deepEqual(await control(sim, 'POST', '/messages', { from: account, to: friend, text: 'x' }), {
      status: 409,
      body: { error: { code: 409, message: `to: account ${friend} has no linked device` } },
    });
  });
});
