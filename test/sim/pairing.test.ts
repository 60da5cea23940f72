import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import {
  closeCode,
  connectClient,
  endClient,
  memoryAuth,
  pairClient,
  startTrustedSimulator,
  waitForUpdate,
} from './support.ts';

describe('simulator: Baileys pairs and logs in (real makeWASocket)', () => {
  let sim: Simulator;
  before(async () => {
    sim = await startTrustedSimulator();
  });
  after(async () => {
    await sim.close();
  });

  it('handshake succeeds and Baileys shows a QR built from a simulator ref', async () => {
    const client = connectClient(sim, memoryAuth());
    const { qr } = await waitForUpdate(client, (u) => typeof u.qr === 'string', 'a QR code');
    const parts = (qr ?? '').replace('https://wa.me/settings/linked_devices#', '').split(',');
    assert.equal(parts.length, 5);
    assert.match(parts[0] ?? '', /^2@/);
    assert.equal(parts[1], Buffer.from(client.auth.creds.noiseKey.public).toString('base64'));
    assert.equal(parts[3], client.auth.creds.advSecretKey);
    await endClient(client);
  });

  it('scan → pair-success verified by Baileys → 515 → login with the stored credentials → open', async () => {
    const user = sim.context.accounts.create({ phone: '4915112345678', pushName: 'Ana' });
    const client = await pairClient(sim, user.phone);
    const me = client.auth.creds.me;
    assert.match(me?.id ?? '', /^4915112345678:1@s\.whatsapp\.net$/);
    assert.equal(me?.lid, `${user.lid}:1@lid`);
    assert.equal(user.devices.get(1)?.linked, true);
    assert.equal(user.devices.get(1)?.sockets.size, 1);
    assert.ok(client.auth.creds.account?.deviceSignature, 'Baileys countersigned the device identity');
    await endClient(client);

    const again = connectClient(sim, client.auth);
    await waitForUpdate(again, (u) => u.connection === 'open', 'open without a scan');
    assert.equal(
      again.updates.some((u) => typeof u.qr === 'string'),
      false,
      'no QR on reconnect',
    );
    await endClient(again);
  });

  it('a login with a device the account does not have is refused with 401', async () => {
    const user = sim.context.accounts.create({ phone: '4915112345679' });
    const client = await pairClient(sim, user.phone);
    await endClient(client);
    const forged = { ...client.auth, creds: { ...client.auth.creds, noiseKey: memoryAuth().creds.noiseKey } };
    const refused = connectClient(sim, forged);
    const closed = await waitForUpdate(refused, (u) => u.connection === 'close', 'the refusal');
    assert.equal(closeCode(closed), 401);
  });
});
