/**
 * The simulated phone's answer to a media re-upload request (sim/messaging/media-retry.ts), read with Baileys'
 * own `decodeMediaRetryNode` and `decryptMediaRetryData` (Utils/messages-media.js): SUCCESS with a new direct path
 * the media server serves (the same encrypted file), NOT_FOUND once the phone deleted its media
 * (`DELETE /control/users/{phone}/media`), DECRYPTION_ERROR for a request sealed with another key, and an
 * `<error code="2"/>` for a message the simulator never relayed; each recorded in `GET /control/media/retries`.
 * Requests are built with Baileys' `encryptMediaRetryRequest`, as a linked device sends them.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  type BinaryNode,
  decodeMediaRetryNode,
  decryptMediaRetryData,
  encryptMediaRetryRequest,
  proto,
} from 'baileys';
import { encryptMedia } from '../../sim/media/crypto.ts';
import { answerMediaRetry } from '../../sim/messaging/media-retry.ts';
import { type Device, phoneJid, type User } from '../../sim/model/accounts.ts';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';

describe('simulator: the sender phone answers media re-upload requests', () => {
  let sim: Simulator;
  let shop: User;
  let ana: User;
  /** The requesting companion of the shop: no socket, so answers queue in `offline`. */
  const device: Device = { id: 1, linked: true, keyIndex: 1, offline: [], sockets: new Set() };

  before(async () => {
    sim = await startSimulator();
    shop = sim.context.accounts.create({ phone: '5511999990000', pushName: 'Shop' });
    ana = sim.context.accounts.create({ phone: '5511988887777', pushName: 'Ana' });
  });
  after(() => sim.close());

  /** Ana "sent" an image under `id`: the message in her sent list and the file on her phone and the server. */
  function sentImage(id: string) {
    const encrypted = encryptMedia(randomBytes(300), 'image');
    const stored = sim.media.put('image', encrypted.file);
    ana.sent.set(id, {
      to: phoneJid(shop.phone),
      message: {
        imageMessage: {
          url: stored.url,
          directPath: stored.directPath,
          mediaKey: encrypted.mediaKey,
          fileSha256: encrypted.fileSha256,
          fileEncSha256: encrypted.fileEncSha256,
          fileLength: encrypted.fileLength,
        },
      },
    });
    ana.keptMedia ??= new Map();
    ana.keptMedia.set(encrypted.fileEncSha256.toString('base64'), encrypted.file);
    return { ...encrypted, stored };
  }

  /** Sends the shop device's request for `id` (sealed with `mediaKey`) and returns the phone's notification. */
  function ask(id: string, mediaKey: Buffer): BinaryNode {
    const node = encryptMediaRetryRequest(
      { id, remoteJid: phoneJid(ana.phone), fromMe: false },
      mediaKey,
      phoneJid(shop.phone, 1),
    );
    device.offline.length = 0;
    answerMediaRetry(sim.context, { user: shop, device, node });
    const [answer] = device.offline;
    assert.ok(answer, 'one notification for the device');
    assert.equal(answer.tag, 'notification');
    assert.deepEqual(
      { id: answer.attrs.id, type: answer.attrs.type },
      { id, type: 'mediaretry' },
      'named after the message, as Baileys reads it',
    );
    return answer;
  }

  const outcomes = async (id: string) => {
    const res = await fetch(`${sim.control}/media/retries`);
    const body = (await res.json()) as { retries: { id: string; outcome: string; sender?: string }[] };
    return body.retries.filter((r) => r.id === id).map((r) => [r.outcome, r.sender]);
  };

  it('SUCCESS: the same encrypted file at a new direct path', async () => {
    const image = sentImage('A1');
    assert.ok((await fetch(`${sim.control}/media`, { method: 'DELETE' })).ok);
    assert.equal(sim.media.get(image.stored.directPath), undefined, 'the old link expired');
    const event = decodeMediaRetryNode(ask('A1', image.mediaKey));
    assert.deepEqual(event.key, {
      id: 'A1',
      remoteJid: phoneJid(ana.phone),
      fromMe: false,
      participant: undefined,
    });
    assert.ok(event.media, JSON.stringify(event.error));
    const answer = decryptMediaRetryData(event.media, image.mediaKey, 'A1');
    assert.equal(answer.result, proto.MediaRetryNotification.ResultType.SUCCESS);
    assert.ok(answer.directPath);
    assert.notEqual(answer.directPath, image.stored.directPath);
    assert.ok(sim.media.get(answer.directPath)?.file.equals(image.file), 'served again, byte for byte');
    assert.deepEqual(await outcomes('A1'), [['success', ana.phone]]);
  });

  it('NOT_FOUND once the phone deleted its media', async () => {
    const image = sentImage('A2');
    const deleted = await fetch(`${sim.control}/users/${ana.phone}/media`, { method: 'DELETE' });
    assert.equal(deleted.status, 200);
    assert.deepEqual(await deleted.json(), { removed: 2 });
    const event = decodeMediaRetryNode(ask('A2', image.mediaKey));
    assert.ok(event.media);
    const answer = decryptMediaRetryData(event.media, image.mediaKey, 'A2');
    assert.equal(answer.result, proto.MediaRetryNotification.ResultType.NOT_FOUND);
    assert.ok(!answer.directPath);
    assert.deepEqual(await outcomes('A2'), [['not_found', ana.phone]]);
    const unknown = await fetch(`${sim.control}/users/5511900000000/media`, { method: 'DELETE' });
    assert.equal(unknown.status, 404);
  });

  it('DECRYPTION_ERROR for a request sealed with another key', async () => {
    const image = sentImage('A3');
    const event = decodeMediaRetryNode(ask('A3', randomBytes(32)));
    assert.ok(event.media);
    const answer = decryptMediaRetryData(event.media, image.mediaKey, 'A3');
    assert.equal(answer.result, proto.MediaRetryNotification.ResultType.DECRYPTION_ERROR);
    assert.deepEqual(await outcomes('A3'), [['decryption_error', ana.phone]]);
  });

  it('a message the simulator never relayed: an <error code="2"/> answer', async () => {
    const event = decodeMediaRetryNode(ask('NEVER', randomBytes(32)));
    assert.equal(event.media, undefined);
    assert.equal(event.error?.message, 'Failed to re-upload media (2)');
    assert.deepEqual(await outcomes('NEVER'), [['unknown_message', ana.phone]]);
  });
});
