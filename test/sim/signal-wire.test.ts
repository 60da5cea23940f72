/**
 * The Signal layer's wire pieces checked against Baileys' own functions: addresses (jidToSignalProtocolAddress),
 * padding (writeRandomPadMax16 / unpadRandomMax16), stanza shapes (decodeMessageNode), key nodes (malformed
 * uploads, pre-key exhaustion: a bundle without one-time pre-key still opens a session).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type BinaryNode,
  decodeMessageNode,
  encodeWAMessage,
  getNextPreKeysNode,
  parseAndInjectE2ESessions,
  proto,
  unpadRandomMax16,
  writeRandomPadMax16,
} from 'baileys';
import {
  AddressError,
  asCiphertext,
  decodeMessage,
  encodeMessage,
  incomingMessageNode,
  KeyNodeError,
  keyBundleUserNode,
  keyFetchResultNode,
  mergePreKeyUpload,
  messageText,
  PayloadError,
  pad,
  parseKeyFetch,
  parseOutgoingMessage,
  parsePreKeyUpload,
  SimDevice,
  StanzaError,
  sessionAddress,
  signalAddress,
  takeBundle,
  unpad,
} from '../../sim/signal/index.ts';
import { baileysDevice, wire } from './signal-support.ts';

describe('Signal addresses', () => {
  it('match Baileys jidToSignalProtocolAddress, and map PN to LID like its storage', async () => {
    const { repository } = await baileysDevice('15550002222', '800000000000002', 1);
    for (const jid of [
      '15550001111@s.whatsapp.net',
      '15550001111:3@s.whatsapp.net',
      '900000000000001@lid',
      '900000000000001:7@lid',
      '15550001111:99@hosted',
      '900000000000001:99@hosted.lid',
    ]) {
      assert.equal(signalAddress(jid).toString(), repository.jidToSignalProtocolAddress(jid), jid);
    }
    const lidOf = (phone: string) => (phone === '15550001111' ? '900000000000001' : undefined);
    assert.equal(sessionAddress('15550001111:3@s.whatsapp.net', lidOf).toString(), '900000000000001_1.3');
    assert.equal(sessionAddress('15550001111:99@hosted', lidOf).toString(), '900000000000001_129.99');
    assert.equal(sessionAddress('15559999999@s.whatsapp.net', lidOf).toString(), '15559999999.0');
    assert.equal(sessionAddress('900000000000001:2@lid', lidOf).toString(), '900000000000001_1.2');
    assert.throws(() => signalAddress('15550001111:99@s.whatsapp.net'), AddressError);
    assert.throws(() => signalAddress('s.whatsapp.net'), AddressError);
  });
});

describe('Signal payloads', () => {
  it('pad and unpad interoperate with Baileys, and malformed padding is refused', () => {
    const body = Buffer.from('0a0568656c6c6f', 'hex');
    for (let i = 0; i < 50; i++) {
      assert.deepEqual(Buffer.from(unpadRandomMax16(pad(body))), body);
      assert.deepEqual(unpad(writeRandomPadMax16(body)), body);
    }
    assert.throws(() => unpad(Buffer.from([1, 2, 0])), PayloadError);
    assert.throws(() => unpad(Buffer.from([1, 2, 17])), PayloadError);
    assert.throws(() => unpad(Buffer.from([1, 3, 2])), /padding bytes differ/);
    assert.throws(() => unpad(Buffer.alloc(0)), PayloadError);
  });

  it('decodes Baileys encodeWAMessage, unwraps deviceSentMessage, reads text either way', () => {
    const text = { extendedTextMessage: { text: 'quoted reply' } };
    const plain = decodeMessage(encodeWAMessage({ conversation: 'hi' }));
    assert.equal(messageText(plain.message), 'hi');
    assert.equal(plain.destinationJid, undefined);
    const copy = decodeMessage(
      encodeWAMessage({ deviceSentMessage: { destinationJid: '1@s.whatsapp.net', message: text } }),
    );
    assert.equal(copy.destinationJid, '1@s.whatsapp.net');
    assert.equal(messageText(copy.message), 'quoted reply');
    assert.equal(
      proto.Message.decode(unpadRandomMax16(encodeMessage(text))).extendedTextMessage?.text,
      'quoted reply',
    );
    assert.throws(() => decodeMessage(pad(Buffer.from([0xff, 0xff, 0xff]))), PayloadError);
  });
});

describe('Signal stanzas', () => {
  it('an incoming 1:1 message is what Baileys decodeMessageNode reads', async () => {
    const node = await wire(
      incomingMessageNode({
        id: '3EB0AA',
        from: '15550001111@s.whatsapp.net',
        pushName: 'Alice',
        senderAlt: '900000000000001@lid',
        t: 1_760_000_000,
        enc: [{ type: 'pkmsg', ciphertext: Buffer.from([3, 1, 2]) }],
      }),
    );
    assert.deepEqual(node.attrs, {
      id: '3EB0AA',
      from: '15550001111@s.whatsapp.net',
      type: 'text',
      t: '1760000000',
      notify: 'Alice',
      sender_lid: '900000000000001@lid',
    });
    const { fullMessage, author } = decodeMessageNode(
      node,
      '15550002222:1@s.whatsapp.net',
      '800000000000002:1@lid',
    );
    assert.equal(author, '15550001111@s.whatsapp.net');
    assert.deepEqual(
      [
        fullMessage.key.remoteJid,
        fullMessage.key.remoteJidAlt,
        fullMessage.key.fromMe,
        fullMessage.key.addressingMode,
      ],
      ['15550001111@s.whatsapp.net', '900000000000001@lid', false, 'pn'],
    );
  });

  it('LID-addressed, group and own-device messages carry the attributes Baileys reads', () => {
    const enc = [{ type: 'msg' as const, ciphertext: Buffer.from([1]) }];
    const lid = incomingMessageNode({
      id: 'A',
      from: '9001@lid',
      senderAlt: '1555@s.whatsapp.net',
      t: 1,
      enc,
    });
    assert.equal(lid.attrs.sender_pn, '1555@s.whatsapp.net');
    const { fullMessage } = decodeMessageNode(lid, '1777:1@s.whatsapp.net', '9007:1@lid');
    assert.deepEqual(
      [fullMessage.key.remoteJidAlt, fullMessage.key.addressingMode],
      ['1555@s.whatsapp.net', 'lid'],
    );

    const group = incomingMessageNode({
      id: 'B',
      from: '120363000000000001@g.us',
      participant: '1555:2@s.whatsapp.net',
      senderAlt: '9001:2@lid',
      t: 1,
      enc: [{ type: 'skmsg', ciphertext: Buffer.from([1]) }],
    });
    assert.equal(group.attrs.participant_lid, '9001:2@lid');
    assert.equal(
      decodeMessageNode(group, '1777:1@s.whatsapp.net', '9007:1@lid').fullMessage.key.participant,
      '1555:2@s.whatsapp.net',
    );

    const own = incomingMessageNode({
      id: 'C',
      from: '1777@s.whatsapp.net',
      recipient: '1555@s.whatsapp.net',
      t: 1,
      enc,
    });
    const decoded = decodeMessageNode(own, '1777:1@s.whatsapp.net', '9007:1@lid').fullMessage.key;
    assert.deepEqual([decoded.fromMe, decoded.remoteJid], [true, '1555@s.whatsapp.net']);
  });

  it('parses Baileys outgoing shapes and refuses malformed ones naming the part', async () => {
    const enc = (type: string): BinaryNode => ({
      tag: 'enc',
      attrs: { v: '2', type },
      content: Buffer.from([9]),
    });
    const node = await wire({
      tag: 'message',
      attrs: { id: 'M1', to: '1555@s.whatsapp.net', type: 'text', phash: '2:abc' },
      content: [
        {
          tag: 'participants',
          attrs: {},
          content: [
            { tag: 'to', attrs: { jid: '1555@s.whatsapp.net' }, content: [enc('pkmsg')] },
            { tag: 'to', attrs: { jid: '1777@s.whatsapp.net' }, content: [enc('msg')] },
          ],
        },
        { tag: 'device-identity', attrs: {}, content: Buffer.from([1, 2]) },
      ],
    });
    const parsed = parseOutgoingMessage(node);
    assert.deepEqual(
      parsed.encs.map((e) => [e.jid, e.type, e.ciphertext.length]),
      [
        ['1555@s.whatsapp.net', 'pkmsg', 1],
        ['1777@s.whatsapp.net', 'msg', 1],
      ],
    );
    assert.equal(parsed.attrs.phash, '2:abc');
    assert.deepEqual(parsed.deviceIdentity, Buffer.from([1, 2]));

    const group = parseOutgoingMessage({
      tag: 'message',
      attrs: { id: 'G', to: '1203@g.us', type: 'text' },
      content: [enc('skmsg')],
    });
    assert.deepEqual(
      group.encs.map((e) => [e.jid, e.type]),
      [['1203@g.us', 'skmsg']],
    );
    assert.throws(() => asCiphertext(group.encs[0] as never), StanzaError);

    assert.throws(() => parseOutgoingMessage({ tag: 'message', attrs: { to: 'x' } }), /needs an id/);
    assert.throws(
      () => parseOutgoingMessage({ tag: 'message', attrs: { id: '1', to: 'x' }, content: [enc('frank')] }),
      /enc type frank/,
    );
    assert.throws(
      () =>
        parseOutgoingMessage({
          tag: 'message',
          attrs: { id: '1', to: 'x' },
          content: [{ tag: 'participants', attrs: {}, content: [{ tag: 'to', attrs: { jid: 'y' } }] }],
        }),
      /to y has no enc/,
    );
  });
});

describe('Signal key nodes', () => {
  it('refuses malformed uploads naming the part; merges later uploads', async () => {
    const bob = await baileysDevice('15550002222', '800000000000002', 1);
    const { node } = await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 3);
    const upload = await wire(node);
    const without = (tag: string): BinaryNode => ({
      ...upload,
      content: (upload.content as BinaryNode[]).filter((child) => child.tag !== tag),
    });
    assert.throws(() => parsePreKeyUpload(without('skey')), new KeyNodeError('skey is missing'));
    assert.throws(() => parsePreKeyUpload(without('identity')), /identity must be a 32-byte public key/);
    assert.throws(() => parsePreKeyUpload(without('registration')), /registration must be 4 bytes/);
    assert.throws(
      () => parsePreKeyUpload({ ...upload, attrs: { ...upload.attrs, type: 'get' } }),
      KeyNodeError,
    );

    const held = parsePreKeyUpload(upload);
    const { node: again } = await getNextPreKeysNode(
      { creds: { ...bob.creds, nextPreKeyId: 4, firstUnuploadedPreKeyId: 4 }, keys: bob.keys },
      2,
    );
    const merged = mergePreKeyUpload(held, parsePreKeyUpload(await wire(again)));
    assert.equal(merged, held);
    assert.deepEqual([...merged.preKeys.keys()], [1, 2, 3, 4, 5]);
    assert.equal(
      parseKeyFetch({
        tag: 'iq',
        attrs: { xmlns: 'encrypt', type: 'get' },
        content: [{ tag: 'count', attrs: {} }],
      }),
      undefined,
    );
  });

  it('once the one-time pre-keys are gone the bundle has none, and Baileys still opens a session with it', async () => {
    const bob = await baileysDevice('15550002222', '800000000000002', 1);
    const alice = new SimDevice({
      jid: '15550001111@s.whatsapp.net',
      lid: '900000000000001@lid',
      preKeys: 1,
    });
    assert.equal(takeBundle(alice.keys).preKey?.id, 1);
    const bare = takeBundle(alice.keys);
    assert.equal(bare.preKey, undefined);
    const user = await wire(keyBundleUserNode('900000000000001@lid', bare));
    assert.deepEqual(
      (user.content as BinaryNode[]).map((c) => c.tag),
      ['registration', 'type', 'identity', 'skey'],
    );
    await bob.repository.lidMapping.storeLIDPNMappings([{ lid: '900000000000001@lid', pn: alice.jid }]);
    await parseAndInjectE2ESessions(keyFetchResultNode('1', [user]), bob.repository);
    const { type, ciphertext } = await bob.repository.encryptMessage({
      jid: alice.jid,
      data: encodeWAMessage({ conversation: 'no otpk' }),
    });
    assert.equal(type, 'pkmsg');
    const got = await alice.decryptMessage(bob.jid, { type, ciphertext });
    assert.equal(got.message.conversation, 'no otpk');
  });
});
