import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import {
  closeCode,
  connectClient,
  control,
  endClient,
  memoryAuth,
  pairClient,
  startTrustedSimulator,
  waitForEvent,
  waitForUpdate,
} from './support.ts';

describe('simulator control API with a real Baileys client', () => {
  let sim: Simulator;
  before(async () => {
    sim = await startTrustedSimulator();
  });
  after(async () => {
    await sim.close();
  });

  it('POST /control/users defines a user; bad and duplicate input get the error envelope', async () => {
    const created = await control(sim, 'POST', '/users', { phone: '5511987654321', pushName: 'Bia' });
    assert.equal(created.status, 201);
    const user = sim.context.accounts.get('5511987654321');
    assert.deepEqual(created.body, {
      phone: '5511987654321',
      lid: user?.lid,
      jid: '5511987654321@s.whatsapp.net',
      lidJid: `${user?.lid}@lid`,
      pushName: 'Bia',
      registered: true,
    });
    assert.deepEqual(await control(sim, 'POST', '/users', { phone: '5511987654321' }), {
      status: 409,
      body: { error: { code: 409, message: 'user 5511987654321 exists already' } },
    });
    const bad = await control(sim, 'POST', '/users', { phone: '+55 11' });
    assert.equal(bad.status, 400);
    assert.match((bad.body as { error: { message: string } }).error.message, /^phone: must match pattern/);
    assert.deepEqual(await control(sim, 'POST', '/users', {}), {
      status: 400,
      body: { error: { code: 400, message: 'phone: is required' } },
    });
    assert.deepEqual(await control(sim, 'GET', '/accounts/5511000000000'), {
      status: 404,
      body: { error: { code: 404, message: 'phone: no simulated user with phone 5511000000000' } },
    });
  });

  it('POST /control/scan links the device Baileys shows the QR for; accounts shows its socket', async () => {
    await control(sim, 'POST', '/users', { phone: '5511900000001' });
    const auth = memoryAuth();
    const client = connectClient(sim, auth);
    const { qr } = await waitForUpdate(client, (u) => typeof u.qr === 'string', 'a QR code');
    const restarted = waitForUpdate(client, (u) => u.connection === 'close', 'the 515 close');
    const scanned = await control(sim, 'POST', '/scan', { code: qr, phone: '5511900000001' });
    const lid = sim.context.accounts.get('5511900000001')?.lid;
    assert.deepEqual(scanned, {
      status: 200,
      body: { jid: '5511900000001:1@s.whatsapp.net', lid: `${lid}:1@lid`, device: 1 },
    });
    assert.equal(closeCode(await restarted), 515);
    const again = await control(sim, 'POST', '/scan', { code: qr, phone: '5511900000001' });
    assert.equal(again.status, 404, 'a used code cannot be scanned twice');

    const open = connectClient(sim, auth);
    await waitForUpdate(open, (u) => u.connection === 'open', 'open');
    assert.deepEqual(await control(sim, 'GET', '/accounts/5511900000001'), {
      status: 200,
      body: {
        phone: '5511900000001',
        lid,
        devices: [
          { id: 0, linked: true, sockets: 0 },
          { id: 1, linked: true, sockets: 1 },
        ],
      },
    });
    await endClient(open);
  });

  it('receipts and chat state from a user reach Baileys as message and presence updates', async () => {
    await control(sim, 'POST', '/users', { phone: '5511900000002' });
    await control(sim, 'POST', '/users', { phone: '5511900000003', pushName: 'Caio' });
    const client = await pairClient(sim, '5511900000002');
    const read = waitForEvent(
      client,
      'messages.update',
      (u) => u.some((x) => x.key.id === 'ABC1'),
      'a read update',
    );
    assert.deepEqual(
      await control(sim, 'POST', '/receipts', {
        from: '5511900000003',
        to: '5511900000002',
        ids: ['ABC1', 'ABC2'],
        type: 'read',
      }),
      { status: 200, body: { sockets: 1 } },
    );
    const updates = await read;
    const first = updates.find((x) => x.key.id === 'ABC1');
    assert.equal(first?.key.remoteJid, '5511900000003@s.whatsapp.net');
    assert.equal(first?.update.status, 4, 'READ');

    const typing = waitForEvent(
      client,
      'presence.update',
      (p) => p.id === '5511900000003@s.whatsapp.net',
      'a presence update',
    );
    assert.equal(
      (
        await control(sim, 'POST', '/presence', {
          from: '5511900000003',
          to: '5511900000002',
          state: 'recording',
        })
      ).status,
      200,
    );
    const presence = await typing;
    assert.equal(presence.presences['5511900000003@s.whatsapp.net']?.lastKnownPresence, 'recording');
    const bad = await control(sim, 'POST', '/receipts', {
      from: '5511900000003',
      to: '5511900000002',
      ids: [],
      type: 'read',
    });
    assert.equal(bad.status, 400);
    await endClient(client);
  });

  it('faults: stream-error 440 and drop close the socket with that cause; 401 unlinks the device', async () => {
    await control(sim, 'POST', '/users', { phone: '5511900000004' });
    const client = await pairClient(sim, '5511900000004');
    const replaced = waitForUpdate(client, (u) => u.connection === 'close', 'close');
    assert.deepEqual(
      await control(sim, 'POST', '/faults', { phone: '5511900000004', kind: 'stream-error', code: 440 }),
      {
        status: 200,
        body: { phone: '5511900000004', kind: 'stream-error', code: 440, sockets: 1 },
      },
    );
    assert.equal(closeCode(await replaced), 440);

    const second = connectClient(sim, client.auth);
    await waitForUpdate(second, (u) => u.connection === 'open', 'open again');
    const dropped = waitForUpdate(second, (u) => u.connection === 'close', 'close');
    assert.equal(
      (await control(sim, 'POST', '/faults', { phone: '5511900000004', kind: 'drop' })).status,
      200,
    );
    assert.equal(closeCode(await dropped), 428, 'connection closed');

    const third = connectClient(sim, client.auth);
    await waitForUpdate(third, (u) => u.connection === 'open', 'open a third time');
    const unlinked = waitForUpdate(third, (u) => u.connection === 'close', 'close');
    assert.equal(
      (await control(sim, 'POST', '/faults', { phone: '5511900000004', kind: 'stream-error', code: 401 }))
        .status,
      200,
    );
    assert.equal(closeCode(await unlinked), 401);
    const account = await control(sim, 'GET', '/accounts/5511900000004');
    assert.deepEqual((account.body as { devices: unknown[] }).devices[1], {
      id: 1,
      linked: false,
      sockets: 0,
    });
    const refused = connectClient(sim, client.auth);
    assert.equal(closeCode(await waitForUpdate(refused, (u) => u.connection === 'close', 'refusal')), 401);
    assert.deepEqual(await control(sim, 'POST', '/faults', { phone: '5511900000004', kind: 'drop' }), {
      status: 409,
      body: { error: { code: 409, message: 'phone: account 5511900000004 has no open socket' } },
    });
  });

  it('faults: silence stops pings, Baileys declares the connection lost (408)', async () => {
    await control(sim, 'POST', '/users', { phone: '5511900000005' });
    const client = await pairClient(sim, '5511900000005', memoryAuth(), { keepAliveIntervalMs: 500 });
    const lost = waitForUpdate(client, (u) => u.connection === 'close', 'close');
    assert.equal(
      (await control(sim, 'POST', '/faults', { phone: '5511900000005', kind: 'silence' })).status,
      200,
    );
    assert.equal(closeCode(await lost), 408);
  });

  it('logout: remove-companion-device unlinks the device', async () => {
    await control(sim, 'POST', '/users', { phone: '5511900000006' });
    const client = await pairClient(sim, '5511900000006');
    const unlinked = new Promise((resolve) => sim.context.events.once('unlink', resolve));
    await client.sock.logout();
    await unlinked;
    const account = await control(sim, 'GET', '/accounts/5511900000006');
    assert.deepEqual((account.body as { devices: unknown[] }).devices[1], {
      id: 1,
      linked: false,
      sockets: 0,
    });
  });
});
