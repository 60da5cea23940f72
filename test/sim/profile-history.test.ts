/**
 * The simulator's contact profile and history answers, seen by a real Baileys 7 client: usync `status` (about
 * text, Baileys fetchStatus), `contact` (onWhatsApp), `business` (the verified name certificate, read with
 * parley's own usync protocol), `w:profile:picture` (profilePictureUrl, 404 without a picture), LID-only
 * addressing of a user who hides its phone, and the past chats of `POST /control/history` in the initial
 * history of a device linked afterwards (`messaging-history.set`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type BaileysEventMap, USyncQuery, USyncUser } from 'baileys';
import type { Simulator } from '../../sim/simulator.ts';
import { BusinessQueryProtocol } from '../../src/engines/baileys/contacts.ts';
import {
  type Client,
  closeCode,
  connectClient,
  control,
  endClient,
  memoryAuth,
  startTrustedSimulator,
  waitForEvent,
  waitForUpdate,
} from './support.ts';

describe('simulator: profiles, LID-only users and seeded history, with a real Baileys client', () => {
  let sim: Simulator;
  let client: Client;
  let history: Promise<BaileysEventMap['messaging-history.set']>;
  const account = '4930555555571';
  const ana = '4930555555572';
  const acme = '4930555555573';
  const hidden = '4930555555574';
  const lids: Record<string, string> = {};
  let seeded: { with: string; messages: { id: string }[] }[] = [];

  before(async () => {
    sim = await startTrustedSimulator();
    await control(sim, 'POST', '/users', { phone: account, pushName: 'Account' });
    for (const body of [
      { phone: ana, pushName: 'Ana', about: 'At the beach', avatarUrl: 'https://pps.sim.example/ana.jpg' },
      { phone: acme, pushName: 'Acme', verifiedName: 'Acme Ltd' },
      { phone: hidden, pushName: 'Private', hidesPhone: true },
    ]) {
      const created = await control(sim, 'POST', '/users', body);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      lids[body.phone] = (created.body as { lid: string }).lid;
    }
    const set = await control(sim, 'POST', '/history', {
      phone: account,
      chats: [
        {
          with: ana,
          name: 'Ana Souza',
          messages: [
            { fromMe: false, text: 'hello', timestamp: '2026-01-10T10:00:00Z' },
            { fromMe: true, text: 'hi Ana', timestamp: '2026-01-10T10:01:00Z' },
          ],
        },
        { with: hidden, messages: [{ fromMe: false, text: 'psst', timestamp: '2026-01-09T09:00:00Z' }] },
      ],
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    seeded = (set.body as { chats: typeof seeded }).chats;
    // Pair by hand so the history listener is on the second socket before it logs in.
    const auth = memoryAuth();
    const first = connectClient(sim, auth);
    const { qr } = await waitForUpdate(first, (u) => typeof u.qr === 'string', 'a QR code');
    const restarted = waitForUpdate(first, (u) => u.connection === 'close', 'the 515 close');
    await sim.context.pairing.scan(qr ?? '', account);
    assert.equal(closeCode(await restarted), 515);
    client = connectClient(sim, auth);
    history = waitForEvent(client, 'messaging-history.set', () => true, 'the initial history');
    await waitForUpdate(client, (u) => u.connection === 'open', 'open');
  });
  after(async () => {
    await endClient(client);
    await sim.close();
  });

  it('POST /control/users and /control/history refuse bad input naming the field', async () => {
    const bad = await control(sim, 'POST', '/users', { phone: '4930555555579', avatarUrl: 'http://x/y.jpg' });
    assert.equal(bad.status, 400);
    assert.match(
      (bad.body as { error: { message: string } }).error.message,
      /^avatarUrl: must match pattern/,
    );
    assert.deepEqual(
      await control(sim, 'POST', '/history', {
        phone: account,
        chats: [{ with: '4930555555570', messages: [{ fromMe: true, text: 'x' }] }],
      }),
      {
        status: 404,
        body: { error: { code: 404, message: 'chats.0.with: no simulated user with phone 4930555555570' } },
      },
    );
    assert.deepEqual(
      await control(sim, 'POST', '/history', {
        phone: account,
        chats: [{ with: account, messages: [{ fromMe: true, text: 'x' }] }],
      }),
      { status: 400, body: { error: { code: 400, message: 'chats.0.with: must differ from phone' } } },
    );
    const empty = await control(sim, 'POST', '/history', {
      phone: account,
      chats: [{ with: ana, messages: [] }],
    });
    assert.equal(empty.status, 400);
    assert.match((empty.body as { error: { message: string } }).error.message, /messages/);
  });

  it('usync answers the about text, registration and the verified business name', async () => {
    const statuses = await client.sock.fetchStatus(`${ana}@s.whatsapp.net`, `${acme}@s.whatsapp.net`);
    assert.deepEqual(
      statuses?.map((s) => [s.id, (s as { status?: { status: string | null } }).status?.status]),
      [
        [`${ana}@s.whatsapp.net`, 'At the beach'],
        [`${acme}@s.whatsapp.net`, null],
      ],
    );
    assert.deepEqual(await client.sock.onWhatsApp(ana, '4930555555570'), [
      { jid: `${ana}@s.whatsapp.net`, exists: true },
    ]);
    const query = new USyncQuery().withContactProtocol();
    query.protocols.push(new BusinessQueryProtocol());
    query.withUser(new USyncUser().withPhone(`+${acme}`)).withUser(new USyncUser().withPhone(`+${ana}`));
    const result = await client.sock.executeUSyncQuery(query);
    assert.deepEqual(
      result?.list.map((u) => [u.id, u.contact, (u as { business?: string }).business]),
      [
        [`${acme}@s.whatsapp.net`, true, 'Acme Ltd'],
        [`${ana}@s.whatsapp.net`, true, ''],
      ],
    );
  });

  it('w:profile:picture answers the URL by phone or LID; a user without a picture is 404', async () => {
    assert.equal(
      await client.sock.profilePictureUrl(`${ana}@s.whatsapp.net`, 'image'),
      'https://pps.sim.example/ana.jpg',
    );
    assert.equal(await client.sock.profilePictureUrl(`${lids[ana]}@lid`), 'https://pps.sim.example/ana.jpg');
    await assert.rejects(client.sock.profilePictureUrl(`${acme}@s.whatsapp.net`), (error: unknown) => {
      // Baileys' assertNodeErrorFree keeps the iq error code as the Boom's data.
      assert.equal((error as { data?: unknown }).data, 404);
      return true;
    });
  });

  it("a user who hides its phone writes by LID with no sender_pn; a business's message carries its verified name", async () => {
    const fromHidden = waitForEvent(
      client,
      'messages.upsert',
      (u) => u.messages.some((m) => m.message?.conversation === 'from the shadows'),
      'the LID-only message',
    );
    await control(sim, 'POST', '/messages', { from: hidden, to: account, text: 'from the shadows' });
    const hiddenMessage = (await fromHidden).messages[0];
    assert.equal(hiddenMessage?.key.remoteJid, `${lids[hidden]}@lid`);
    assert.equal(hiddenMessage?.key.remoteJidAlt, undefined);
    assert.equal(await client.sock.signalRepository.lidMapping.getPNForLID(`${lids[hidden]}@lid`), null);

    const business = waitForEvent(
      client,
      'contacts.update',
      (u) => u.some((c) => c.verifiedName === 'Acme Ltd'),
      "the business's verified name",
    );
    await control(sim, 'POST', '/messages', { from: acme, to: account, text: 'invoice' });
    assert.deepEqual(
      (await business).find((c) => c.verifiedName)?.id,
      `${lids[acme]}@lid`,
      'named by the LID the message came from',
    );
  });

  it('the initial history of a device linked afterwards holds the seeded chats, by LID with the phone beside it', async () => {
    const set = await history;
    const [anaChat, hiddenChat] = seeded;
    assert.ok(anaChat && hiddenChat);
    assert.deepEqual(
      set.chats.map((c) => [c.id, c.pnJid ?? null, c.name ?? null]),
      [
        [`${lids[ana]}@lid`, `${ana}@s.whatsapp.net`, 'Ana Souza'],
        [`${lids[hidden]}@lid`, null, null],
      ],
    );
    assert.deepEqual(
      set.messages.map((m) => [m.key.remoteJid, m.key.id, m.key.fromMe, m.message?.conversation]),
      [
        [`${lids[ana]}@lid`, anaChat.messages[1]?.id, true, 'hi Ana'],
        [`${lids[ana]}@lid`, anaChat.messages[0]?.id, false, 'hello'],
        [`${lids[hidden]}@lid`, hiddenChat.messages[0]?.id, false, 'psst'],
      ],
    );
    // The mapping the history carried is stored: the LID resolves to the phone.
    assert.equal(
      await client.sock.signalRepository.lidMapping.getPNForLID(`${lids[ana]}@lid`),
      `${ana}:0@s.whatsapp.net`,
    );
  });
});
