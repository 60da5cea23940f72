/**
 * Fan-out and retries against Baileys: a simulated phone sends to a contact and its own Baileys companion
 * (deviceSentMessage, which Baileys shows as fromMe); a Baileys device that lost its session asks for a retry
 * the way sendRetryRequest builds it, and the resend in a fresh session decrypts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type BinaryNode,
  decryptMessageNode,
  encodeBigEndian,
  encodeWAMessage,
  extractE2ESessionFromRetryReceipt,
  getNextPreKeys,
  getNextPreKeysNode,
  KEY_BUNDLE_TYPE,
  type WAMessage,
  xmppPreKey,
  xmppSignedPreKey,
} from 'baileys';
import {
  answerRetry,
  encryptToDevices,
  incomingMessageNode,
  parsePreKeyUpload,
  parseRetryReceipt,
  SignalError,
  SimDevice,
} from '../../sim/signal/index.ts';
import { type BaileysDevice, baileysDevice, baileysLogger, wire } from './signal-support.ts';

const BOB = { phone: '15550002222', lid: '800000000000002' };
const CAROL = { phone: '15550003333', lid: '700000000000003' };
const lids = new Map([
  [BOB.phone, BOB.lid],
  [CAROL.phone, CAROL.lid],
]);
const lidOf = (phone: string) => lids.get(phone);
const phoneOf = (user: { phone: string; lid: string }) =>
  new SimDevice({ jid: `${user.phone}@s.whatsapp.net`, lid: `${user.lid}@lid`, preKeys: 3, lidOf });

async function receive(bob: BaileysDevice, stanza: BinaryNode): Promise<WAMessage> {
  const { fullMessage, decrypt } = decryptMessageNode(
    await wire(stanza),
    bob.jid,
    bob.lid,
    bob.repository,
    baileysLogger,
  );
  await decrypt();
  return fullMessage;
}

/** The retry receipt Baileys' sendRetryRequest sends, with `<keys>` when `withKeys`. */
async function retryReceipt(
  bob: BaileysDevice,
  failed: BinaryNode,
  count: number,
  withKeys: boolean,
): Promise<BinaryNode> {
  const content: BinaryNode[] = [
    {
      tag: 'retry',
      attrs: { count: String(count), id: failed.attrs.id ?? '', t: failed.attrs.t ?? '', v: '1', error: '0' },
    },
    { tag: 'registration', attrs: {}, content: encodeBigEndian(bob.creds.registrationId) },
  ];
  if (withKeys) {
    const { update, preKeys } = await getNextPreKeys({ creds: bob.creds, keys: bob.keys }, 1);
    Object.assign(bob.creds, update);
    const [id] = Object.keys(preKeys);
    const pair = preKeys[Number(id)];
    assert.ok(pair);
    content.push({
      tag: 'keys',
      attrs: {},
      content: [
        { tag: 'type', attrs: {}, content: Buffer.from(KEY_BUNDLE_TYPE) },
        { tag: 'identity', attrs: {}, content: bob.creds.signedIdentityKey.public },
        xmppPreKey(pair, Number(id)),
        xmppSignedPreKey(bob.creds.signedPreKey),
        { tag: 'device-identity', attrs: {}, content: Buffer.from([1]) },
      ],
    });
  }
  return wire({
    tag: 'receipt',
    attrs: { id: failed.attrs.id ?? '', type: 'retry', to: failed.attrs.from ?? '' },
    content,
  });
}

describe('Signal fan-out', () => {
  it("the account's phone sends to a contact and to its own companion; Baileys sees it as sent by itself", async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const bobPhone = phoneOf(BOB);
    const carol = phoneOf(CAROL);
    const uploaded = parsePreKeyUpload(
      await wire((await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 2)).node),
    );
    const out = await encryptToDevices(
      bobPhone,
      [
        { jid: carol.jid, keys: carol.keys },
        { jid: bob.jid, keys: uploaded, own: true },
      ],
      { conversation: 'from my phone' },
      carol.jid,
    );
    assert.deepEqual(
      out.map((c) => [c.jid, c.enc.type, c.newSession]),
      [
        [carol.jid, 'pkmsg', true],
        [bob.jid, 'pkmsg', true],
      ],
    );
    const [toCarol, toCompanion] = out;
    assert.ok(toCarol && toCompanion);
    assert.equal(
      (await carol.decryptMessage(bobPhone.jid, toCarol.enc)).message.conversation,
      'from my phone',
    );
    const got = await receive(
      bob,
      incomingMessageNode({
        id: '3EB0F1',
        from: bobPhone.jid,
        recipient: carol.jid,
        senderAlt: bobPhone.lid,
        enc: [toCompanion.enc],
      }),
    );
    assert.equal(got.key.fromMe, true);
    assert.equal(got.key.remoteJid, carol.jid);
    assert.equal(got.message?.conversation, 'from my phone');

    // second message: sessions exist, no keys needed
    const again = await encryptToDevices(bobPhone, [{ jid: carol.jid }], { conversation: '2' }, carol.jid);
    assert.equal(again[0]?.newSession, false);
    await assert.rejects(
      encryptToDevices(bobPhone, [{ jid: '15559999999@s.whatsapp.net' }], { conversation: 'x' }, 'x'),
      SignalError,
    );
  });
});

describe('Signal retry receipts', () => {
  it('a device that lost its session asks again with keys; the resend in a fresh session decrypts', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const carol = phoneOf(CAROL);
    const uploaded = parsePreKeyUpload(
      await wire((await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 2)).node),
    );
    const send = async (text: string, id: string) => {
      const [c] = await encryptToDevices(
        carol,
        [{ jid: bob.jid, keys: uploaded }],
        { conversation: text },
        bob.jid,
      );
      assert.ok(c);
      return incomingMessageNode({
        id,
        from: carol.jid,
        senderAlt: carol.lid,
        t: 1_760_000_000,
        enc: [c.enc],
      });
    };
    assert.equal((await receive(bob, await send('one', 'M1'))).message?.conversation, 'one');
    await bob.repository.deleteSession([carol.lid ?? '']); // Baileys keys it by LID
    const failed = await send('two', 'M2');
    const lost = await receive(bob, failed);
    assert.equal(lost.message, undefined, 'no session: Baileys cannot decrypt');

    const receipt = await retryReceipt(bob, failed, 2, true);
    const retry = parseRetryReceipt(receipt, bob.jid);
    assert.ok(retry?.bundle);
    const baileysView = extractE2ESessionFromRetryReceipt(receipt);
    assert.equal(retry.registrationId, baileysView?.registrationId);
    assert.equal(retry.bundle.signedPreKey.id, baileysView?.signedPreKey.keyId);
    assert.equal(retry.bundle.preKey?.id, baileysView?.preKey?.keyId);
    assert.deepEqual([retry.id, retry.to, retry.count], ['M2', carol.jid, 2]);

    const enc = await answerRetry(carol, retry, { conversation: 'two' });
    assert.equal(enc.type, 'pkmsg');
    const resent = incomingMessageNode({
      id: 'M2',
      from: carol.jid,
      senderAlt: carol.lid,
      enc: [{ ...enc, attrs: { count: String(retry.count) } }],
    });
    const got = await receive(bob, resent);
    assert.equal(got.message?.conversation, 'two');
    assert.equal(got.retryCount, 2);
  });

  it('a message the device sent in the old session still decrypts after a retry opened a new one', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const carol = phoneOf(CAROL);
    const uploaded = parsePreKeyUpload(
      await wire((await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 2)).node),
    );
    const [first] = await encryptToDevices(
      carol,
      [{ jid: bob.jid, keys: uploaded }],
      { conversation: 'one' },
      bob.jid,
    );
    assert.ok(first);
    const one = incomingMessageNode({ id: 'M1', from: carol.jid, senderAlt: carol.lid, enc: [first.enc] });
    assert.equal((await receive(bob, one)).message?.conversation, 'one');
    // Bob answers in that session; the reply is still on its way when a retry from Bob (another of its messages
    // could not be decrypted, as on a node taking the instance over) makes Carol open a new session.
    const reply = await bob.repository.encryptMessage({
      jid: carol.lid ?? '',
      data: encodeWAMessage({ conversation: 'reply in the old session' }),
    });
    assert.equal(reply.type, 'msg');
    const failed = incomingMessageNode({ id: 'M2', from: carol.jid, senderAlt: carol.lid, enc: [first.enc] });
    const retry = parseRetryReceipt(await retryReceipt(bob, failed, 2, true), bob.jid);
    assert.ok(retry?.bundle);
    assert.equal((await answerRetry(carol, retry, { conversation: 'two' })).type, 'pkmsg');
    const got = await carol.decryptMessage(bob.jid, { type: 'msg', ciphertext: reply.ciphertext });
    assert.equal(got.message.conversation, 'reply in the old session');
  });

  it('a first retry without keys is answered from the published keys; other receipts are not retries', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const carol = phoneOf(CAROL);
    const uploaded = parsePreKeyUpload(
      await wire((await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 2)).node),
    );
    const failed = incomingMessageNode({
      id: 'M9',
      from: carol.jid,
      t: 1,
      enc: [{ type: 'msg', ciphertext: Buffer.from([0x33, 1]) }],
    });
    const retry = parseRetryReceipt(await retryReceipt(bob, failed, 1, false), bob.jid);
    assert.ok(retry);
    assert.equal(retry.bundle, undefined);
    await assert.rejects(answerRetry(carol, retry, { conversation: 'x' }), SignalError);
    const enc = await answerRetry(carol, retry, { conversation: 'again' }, uploaded);
    const got = await receive(
      bob,
      incomingMessageNode({ id: 'M9', from: carol.jid, senderAlt: carol.lid, enc: [enc] }),
    );
    assert.equal(got.message?.conversation, 'again');
    assert.equal(parseRetryReceipt({ tag: 'receipt', attrs: { id: 'x', type: 'read' } }, bob.jid), undefined);
  });
});
