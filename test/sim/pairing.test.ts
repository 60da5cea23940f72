import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { verifySignature } from '../../sim/noise/certificates.ts';
import type { Simulator } from '../../sim/simulator.ts';
import {
  closeCode,
  connectClient,
  endClient,
  memoryAuth,
  pairClient,
  startTrustedSimulator,
  waitForEvent,
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

  it('QR codes rotate on the client timer, one per ref; a later code links; after the last ref Baileys gives up (408)', async () => {
    const user = sim.context.accounts.create({ phone: '4915112345670' });
    const rotating = connectClient(sim, memoryAuth(), { qrTimeout: 150 });
    const qrs = new Set<string>();
    rotating.sock.ev.on('connection.update', (u) => {
      if (typeof u.qr === 'string') qrs.add(u.qr);
    });
    await waitForEvent(rotating, 'connection.update', () => qrs.size >= 3, 'three QR codes');
    const refs = [...qrs].map((qr) => qr.split('#')[1]?.split(',')[0]);
    assert.equal(new Set(refs).size, 3, 'each code carries its own ref');
    const closed = await waitForUpdate(rotating, (u) => u.connection === 'close', 'the end of the refs');
    assert.equal(closeCode(closed), 408);
    assert.equal(qrs.size, 6, 'one code per ref of the pair-device iq');

    const auth = memoryAuth();
    const client = connectClient(sim, auth, { qrTimeout: 150 });
    const second = await waitForEvent(
      client,
      'connection.update',
      (u) => typeof u.qr === 'string' && client.updates.filter((x) => typeof x.qr === 'string').length >= 2,
      'a second QR',
    );
    const restarted = waitForUpdate(client, (u) => u.connection === 'close', 'the 515 close');
    await sim.context.pairing.scan(second.qr ?? '', user.phone);
    assert.equal(closeCode(await restarted), 515);
  });

  it('scan → pair-success verified by Baileys → 515 → login with the stored credentials → open', async () => {
    const user = sim.context.accounts.create({ phone: '4915112345678', pushName: 'Ana' });
    const client = await pairClient(sim, user.phone);
    const me = client.auth.creds.me;
    assert.match(me?.id ?? '', /^4915112345678:1@s\.whatsapp\.net$/);
    assert.equal(me?.lid, `${user.lid}:1@lid`);
    assert.equal(user.devices.get(1)?.linked, true);
    assert.equal(user.devices.get(1)?.sockets.size, 1);
    // Signatures recomputed independently (libsignal's curve): the account key signed the companion identity,
    // and the companion countersigned it with its identity key.
    const account = client.auth.creds.account;
    const details = Buffer.from(account?.details ?? []);
    const identity = Buffer.from(client.auth.creds.signedIdentityKey.public);
    assert.deepEqual(Buffer.from(account?.accountSignatureKey ?? []), user.accountKey.public);
    assert.ok(
      verifySignature(
        user.accountKey.public,
        Buffer.concat([Buffer.from([6, 0]), details, identity]),
        account?.accountSignature ?? new Uint8Array(),
      ),
    );
    assert.ok(
      verifySignature(
        identity,
        Buffer.concat([Buffer.from([6, 1]), details, identity, user.accountKey.public]),
        account?.deviceSignature ?? new Uint8Array(),
      ),
    );
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
