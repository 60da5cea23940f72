/**
 * The simulator's Signal layer against Baileys 7's own Signal code: keys Baileys uploads are parsed and handed
 * out, a simulated user encrypts and Baileys' decryptMessageNode (the messages-recv path) decrypts; Baileys
 * injects the bundle the simulator serves through parseAndInjectE2ESessions, encrypts, and the simulated
 * device decrypts. Every node crosses Baileys' binary codec. A wrong identity or a missing session fails.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type BinaryNode,
  decryptMessageNode,
  encodeWAMessage,
  getNextPreKeysNode,
  parseAndInjectE2ESessions,
  type proto,
  type WAMessage,
} from 'baileys';
import {
  asCiphertext,
  type Ciphertext,
  incomingMessageNode,
  keyBundleUserNode,
  keyFetchResultNode,
  parseKeyFetch,
  parseOutgoingMessage,
  parsePreKeyUpload,
  SignalError,
  SimDevice,
  takeBundle,
} from '../../sim/signal/index.ts';
import { type BaileysDevice, baileysDevice, baileysLogger, wire } from './signal-support.ts';

const ALICE = { phone: '15550001111', lid: '900000000000001' };
const BOB = { phone: '15550002222', lid: '800000000000002' };
const lids = new Map([
  [ALICE.phone, ALICE.lid],
  [BOB.phone, BOB.lid],
]);
const lidOf = (phone: string) => lids.get(phone);

function simUser(user: { phone: string; lid: string }): SimDevice {
  return new SimDevice({ jid: `${user.phone}@s.whatsapp.net`, lid: `${user.lid}@lid`, preKeys: 5, lidOf });
}

let counter = 0;
const messageId = () => `3EB0${(++counter).toString(16).toUpperCase().padStart(12, '0')}`;

/** Baileys' receive path: decode the stanza (after the wire) and decrypt it with Baileys' repository. */
async function baileysReceives(bob: BaileysDevice, stanza: BinaryNode): Promise<WAMessage> {
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

/** The simulated user sends `text` to Bob's device as the server delivers it (PN-addressed, with sender_lid). */
async function simSends(
  alice: SimDevice,
  bob: BaileysDevice,
  text: string,
): Promise<{ stanza: BinaryNode; enc: Ciphertext }> {
  const enc = await alice.encryptMessage(bob.jid, { conversation: text });
  const stanza = incomingMessageNode({
    id: messageId(),
    from: alice.jid,
    pushName: 'Alice',
    senderAlt: alice.lid,
    t: 1_760_000_000,
    enc: [enc],
  });
  return { stanza, enc };
}

/** Baileys encrypts `message` to each JID as createParticipantNodes does and sends relayMessage's stanza. */
async function baileysSends(
  bob: BaileysDevice,
  to: string,
  targets: [string, proto.IMessage][],
): Promise<BinaryNode> {
  const participants: BinaryNode[] = [];
  for (const [jid, message] of targets) {
    const { type, ciphertext } = await bob.repository.encryptMessage({ jid, data: encodeWAMessage(message) });
    participants.push({
      tag: 'to',
      attrs: { jid },
      content: [{ tag: 'enc', attrs: { v: '2', type }, content: ciphertext }],
    });
  }
  return wire({
    tag: 'message',
    attrs: { id: messageId(), to, type: 'text' },
    content: [{ tag: 'participants', attrs: {}, content: participants }],
  });
}

/**
 * Usync taught Baileys `device`'s LID (messages-send.js getUSyncDevices stores the mapping); Baileys 7 then
 * fetches its keys by LID (assertSessions), the server answers with `device`'s bundle; Baileys injects it.
 */
async function serveKeyFetch(
  bob: BaileysDevice,
  user: { phone: string; lid: string },
  device: SimDevice,
): Promise<void> {
  await bob.repository.lidMapping.storeLIDPNMappings([
    { lid: `${user.lid}@lid`, pn: `${user.phone}@s.whatsapp.net` },
  ]);
  const jid = `${user.lid}@lid`;
  const request = await wire({
    tag: 'iq',
    attrs: { id: 'k1', xmlns: 'encrypt', type: 'get', to: 's.whatsapp.net' },
    content: [{ tag: 'key', attrs: {}, content: [{ tag: 'user', attrs: { jid } }] }],
  });
  const targets = parseKeyFetch(request);
  assert.deepEqual(targets, [{ jid }]);
  const answer = keyFetchResultNode('k1', [keyBundleUserNode(jid, takeBundle(device.keys))]);
  await parseAndInjectE2ESessions(await wire(answer), bob.repository);
}

describe('Signal: simulated user → Baileys, on the keys Baileys uploaded', () => {
  it('parses the upload, hands out one pre-key, pkmsg then msg both ways', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const alice = simUser(ALICE);
    const { node } = await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 5);
    const uploaded = parsePreKeyUpload(await wire(node));
    assert.equal(uploaded.registrationId, bob.creds.registrationId);
    assert.deepEqual(uploaded.identity, Buffer.from(bob.creds.signedIdentityKey.public));
    assert.deepEqual([...uploaded.preKeys.keys()], [1, 2, 3, 4, 5]);
    assert.equal(uploaded.signedPreKey.id, bob.creds.signedPreKey.keyId);

    const bundle = takeBundle(uploaded);
    assert.equal(bundle.preKey?.id, 1);
    assert.deepEqual([...uploaded.preKeys.keys()], [2, 3, 4, 5]);
    await alice.startSession(bob.jid, bundle);

    const first = await simSends(alice, bob, 'hello bob');
    assert.equal(first.enc.type, 'pkmsg');
    const received = await baileysReceives(bob, first.stanza);
    assert.equal(received.messageStubType, undefined, String(received.messageStubParameters));
    assert.equal(received.message?.conversation, 'hello bob');
    assert.equal(received.key?.remoteJid, alice.jid);
    assert.equal(received.key?.remoteJidAlt, alice.lid);
    assert.equal(received.key?.fromMe, false);
    assert.equal(received.pushName, 'Alice');
    assert.equal(received.messageTimestamp, 1_760_000_000);
    // the pkmsg consumed Baileys' one-time pre-key 1; Baileys learnt Alice's LID from sender_lid
    assert.deepEqual(await bob.keys.get('pre-key', ['1']), {});
    assert.equal(await bob.repository.lidMapping.getLIDForPN(alice.jid), alice.lid);

    // Bob answers within the session Alice opened: a whisper message
    const reply = await baileysSends(bob, alice.jid, [[alice.jid, { conversation: 'hi alice' }]]);
    const [enc] = parseOutgoingMessage(reply).encs;
    assert.ok(enc);
    assert.equal(enc.type, 'msg');
    assert.equal(enc.jid, alice.jid);
    const decoded = await alice.decryptMessage(bob.jid, asCiphertext(enc));
    assert.equal(decoded.message.conversation, 'hi alice');

    // and Alice's next message is a whisper message too
    const second = await simSends(alice, bob, 'second');
    assert.equal(second.enc.type, 'msg');
    assert.equal((await baileysReceives(bob, second.stanza)).message?.conversation, 'second');
  });

  it('Baileys cannot decrypt when the bundle handed out is not its own (wrong identity)', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const other = await baileysDevice(BOB.phone, BOB.lid, 2);
    const alice = simUser(ALICE);
    const { node } = await getNextPreKeysNode({ creds: other.creds, keys: other.keys }, 2);
    await alice.startSession(bob.jid, takeBundle(parsePreKeyUpload(await wire(node))));
    const { stanza } = await simSends(alice, bob, 'lost');
    const received = await baileysReceives(bob, stanza);
    assert.equal(received.message, undefined);
    assert.equal(received.messageStubType, 2); // WebMessageInfo.StubType.CIPHERTEXT
  });

  it('refuses to encrypt without a session, and a bundle whose signature is not by its identity', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const alice = simUser(ALICE);
    await assert.rejects(alice.encryptMessage(bob.jid, { conversation: 'x' }), SignalError);
    const { node } = await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 1);
    const bundle = takeBundle(parsePreKeyUpload(await wire(node)));
    const forged = { ...bundle, identity: Buffer.from(simUser(ALICE).keys.identity) };
    await assert.rejects(alice.startSession(bob.jid, forged), SignalError);
  });
});

describe('Signal: Baileys → simulated user, on the bundle the simulator serves', () => {
  it('injects through parseAndInjectE2ESessions; pkmsg then msg both ways; own-device copy as deviceSentMessage', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const alice = simUser(ALICE);
    const bobPhone = simUser(BOB);
    await serveKeyFetch(bob, ALICE, alice);
    await serveKeyFetch(bob, BOB, bobPhone);
    assert.equal(alice.keys.preKeys.size, 4);

    const text: proto.IMessage = { extendedTextMessage: { text: 'hello alice' } };
    const copy: proto.IMessage = { deviceSentMessage: { destinationJid: alice.jid, message: text } };
    const sent = parseOutgoingMessage(
      await baileysSends(bob, alice.jid, [
        [alice.jid, text],
        [bobPhone.jid, copy],
      ]),
    );
    assert.deepEqual(
      sent.encs.map((e) => [e.jid, e.type]),
      [
        [alice.jid, 'pkmsg'],
        [bobPhone.jid, 'pkmsg'],
      ],
    );
    const [toAlice, toPhone] = sent.encs;
    assert.ok(toAlice && toPhone);
    const got = await alice.decryptMessage(bob.jid, asCiphertext(toAlice));
    assert.equal(got.message.extendedTextMessage?.text, 'hello alice');
    assert.equal(got.identityChanged, true); // first contact: identity recorded
    assert.deepEqual(alice.identityOf(bob.jid), Buffer.from(bob.creds.signedIdentityKey.public));
    assert.equal(alice.preKeyCount(), 4); // the pkmsg used the handed-out one-time pre-key
    const synced = await bobPhone.decryptMessage(bob.jid, asCiphertext(toPhone));
    assert.equal(synced.destinationJid, alice.jid);
    assert.equal(synced.message.extendedTextMessage?.text, 'hello alice');

    // a replayed ciphertext does not decrypt twice
    await assert.rejects(alice.decryptMessage(bob.jid, asCiphertext(toAlice)), SignalError);

    // Alice answers: a whisper message, which Baileys decrypts (the session Baileys stored under Alice's LID)
    const answer = await simSends(alice, bob, 'hi bob');
    assert.equal(answer.enc.type, 'msg');
    assert.equal((await baileysReceives(bob, answer.stanza)).message?.conversation, 'hi bob');

    // Bob's next message to Alice is a whisper message as well
    const next = parseOutgoingMessage(
      await baileysSends(bob, alice.jid, [[alice.jid, { conversation: 'again' }]]),
    );
    const [again] = next.encs;
    assert.ok(again);
    assert.equal(again.type, 'msg');
    assert.equal((await alice.decryptMessage(bob.jid, asCiphertext(again))).message.conversation, 'again');
  });

  it('a bundle with the wrong identity makes the simulated device fail to decrypt', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const alice = simUser(ALICE);
    const impostor = simUser(ALICE);
    await serveKeyFetch(bob, ALICE, impostor);
    const sent = parseOutgoingMessage(
      await baileysSends(bob, alice.jid, [[alice.jid, { conversation: 'x' }]]),
    );
    const [enc] = sent.encs;
    assert.ok(enc);
    await assert.rejects(alice.decryptMessage(bob.jid, asCiphertext(enc)), SignalError);
  });

  it('a whisper message without a session fails', async () => {
    const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
    const alice = simUser(ALICE);
    const carol = simUser(ALICE);
    await serveKeyFetch(bob, ALICE, alice);
    const first = parseOutgoingMessage(
      await baileysSends(bob, alice.jid, [[alice.jid, { conversation: '1' }]]),
    );
    const [pkmsg] = first.encs;
    assert.ok(pkmsg);
    await alice.decryptMessage(bob.jid, asCiphertext(pkmsg));
    await simSends(alice, bob, 'ack').then(({ stanza }) => baileysReceives(bob, stanza));
    const second = parseOutgoingMessage(
      await baileysSends(bob, alice.jid, [[alice.jid, { conversation: '2' }]]),
    );
    const [msg] = second.encs;
    assert.ok(msg);
    assert.equal(msg.type, 'msg');
    await assert.rejects(carol.decryptMessage(bob.jid, asCiphertext(msg)), /no session|No session/i);
  });

  it('a device that re-registered with a new identity opens a new session; the change is reported', async () => {
    const before = await baileysDevice(BOB.phone, BOB.lid, 1);
    const alice = simUser(ALICE);
    alice.addPreKeys(2);
    await serveKeyFetch(before, ALICE, alice);
    const [first] = parseOutgoingMessage(
      await baileysSends(before, alice.jid, [[alice.jid, { conversation: 'old' }]]),
    ).encs;
    assert.ok(first);
    assert.equal((await alice.decryptMessage(before.jid, asCiphertext(first))).identityChanged, true);

    const after = await baileysDevice(BOB.phone, BOB.lid, 1); // same device JID, new keys
    await serveKeyFetch(after, ALICE, alice);
    const [second] = parseOutgoingMessage(
      await baileysSends(after, alice.jid, [[alice.jid, { conversation: 'new' }]]),
    ).encs;
    assert.ok(second);
    const got = await alice.decryptMessage(after.jid, asCiphertext(second));
    assert.equal(got.message.conversation, 'new');
    assert.equal(got.identityChanged, true);
    assert.deepEqual(alice.identityOf(after.jid), Buffer.from(after.creds.signedIdentityKey.public));
    // and Alice's answer goes to the new identity
    const answer = await simSends(alice, after, 'welcome back');
    assert.equal((await baileysReceives(after, answer.stanza)).message?.conversation, 'welcome back');
  });
});
