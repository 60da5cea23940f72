/**
 * Group messages (sender keys) between the simulator's own implementation and Baileys' (its repository's
 * encryptGroupMessage / decryptMessageNode): the distribution travels in a 1:1 pkmsg of the same stanza, the
 * text in the `skmsg`; later messages carry only the skmsg; tampering, replays and a missing key fail.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type BinaryNode,
  decryptMessageNode,
  encodeWAMessage,
  getNextPreKeysNode,
  parseAndInjectE2ESessions,
  type WAMessage,
} from 'baileys';
import {
  asCiphertext,
  encryptToDevices,
  incomingMessageNode,
  keyBundleUserNode,
  keyFetchResultNode,
  parseOutgoingMessage,
  parsePreKeyUpload,
  SignalError,
  SimDevice,
  takeBundle,
} from '../../sim/signal/index.ts';
import { type BaileysDevice, baileysDevice, baileysLogger, wire } from './signal-support.ts';

const GROUP = '120363000000000001@g.us';
const ALICE = { phone: '15550001111', lid: '900000000000001' };
const BOB = { phone: '15550002222', lid: '800000000000002' };
const lids = new Map([
  [ALICE.phone, ALICE.lid],
  [BOB.phone, BOB.lid],
]);
const lidOf = (phone: string) => lids.get(phone);

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

/** Baileys' relayMessage for a group: the SKDM to `alice` in a 1:1 enc (when `withKey`), the text as skmsg. */
async function baileysGroupSend(
  bob: BaileysDevice,
  alice: SimDevice,
  text: string,
  withKey: boolean,
): Promise<BinaryNode> {
  const { ciphertext, senderKeyDistributionMessage } = await bob.repository.encryptGroupMessage({
    group: GROUP,
    meId: bob.lid,
    data: encodeWAMessage({ conversation: text }),
  });
  const content: BinaryNode[] = [];
  if (withKey) {
    const skdm = encodeWAMessage({
      senderKeyDistributionMessage: {
        groupId: GROUP,
        axolotlSenderKeyDistributionMessage: senderKeyDistributionMessage,
      },
    });
    const { type, ciphertext: c } = await bob.repository.encryptMessage({ jid: alice.lid ?? '', data: skdm });
    content.push({
      tag: 'participants',
      attrs: {},
      content: [
        {
          tag: 'to',
          attrs: { jid: alice.lid ?? '' },
          content: [{ tag: 'enc', attrs: { v: '2', type }, content: c }],
        },
      ],
    });
  }
  content.push({ tag: 'enc', attrs: { v: '2', type: 'skmsg' }, content: ciphertext });
  return wire({
    tag: 'message',
    attrs: { id: `G${text}`, to: GROUP, type: 'text', addressing_mode: 'lid' },
    content,
  });
}

async function pair(): Promise<{ bob: BaileysDevice; alice: SimDevice }> {
  const bob = await baileysDevice(BOB.phone, BOB.lid, 1);
  const alice = new SimDevice({
    jid: `${ALICE.phone}@s.whatsapp.net`,
    lid: `${ALICE.lid}@lid`,
    preKeys: 3,
    lidOf,
  });
  await bob.repository.lidMapping.storeLIDPNMappings([{ lid: alice.lid ?? '', pn: alice.jid }]);
  const answer = keyFetchResultNode('1', [keyBundleUserNode(alice.lid ?? '', takeBundle(alice.keys))]);
  await parseAndInjectE2ESessions(await wire(answer), bob.repository);
  return { bob, alice };
}

describe('Signal group messages (sender keys)', () => {
  it('Baileys → simulated member: distribution in a pkmsg, text in skmsg; out of order; replay refused', async () => {
    const { bob, alice } = await pair();
    const first = parseOutgoingMessage(await baileysGroupSend(bob, alice, 'hello group', true));
    assert.deepEqual(
      first.encs.map((e) => [e.jid, e.type]),
      [
        [alice.lid, 'pkmsg'],
        [GROUP, 'skmsg'],
      ],
    );
    const [skdm, skmsg] = first.encs;
    assert.ok(skdm && skmsg);
    assert.throws(() => alice.decryptGroupMessage(GROUP, bob.lid, skmsg.ciphertext), /no sender key/);
    // the 1:1 part is addressed by PN here, the group author by LID: both name Bob's LID address
    const key = await alice.decryptMessage(bob.jid, asCiphertext(skdm));
    assert.equal(key.senderKeyGroup, GROUP);
    assert.equal(alice.hasSenderKey(GROUP, bob.lid), true);
    assert.equal(
      alice.decryptGroupMessage(GROUP, bob.lid, skmsg.ciphertext).message.conversation,
      'hello group',
    );

    const second = parseOutgoingMessage(await baileysGroupSend(bob, alice, 'two', false)).encs[0];
    const third = parseOutgoingMessage(await baileysGroupSend(bob, alice, 'three', false)).encs[0];
    assert.ok(second && third);
    assert.equal(alice.decryptGroupMessage(GROUP, bob.lid, third.ciphertext).message.conversation, 'three');
    assert.equal(alice.decryptGroupMessage(GROUP, bob.lid, second.ciphertext).message.conversation, 'two');
    assert.throws(() => alice.decryptGroupMessage(GROUP, bob.lid, second.ciphertext), /used already/);

    const tampered = Buffer.from(third.ciphertext);
    tampered[5] = (tampered[5] ?? 0) ^ 0xff;
    assert.throws(() => alice.decryptGroupMessage(GROUP, bob.lid, tampered), /bad signature/);
  });

  it('simulated member → Baileys: distribution and skmsg in one stanza, then skmsg alone', async () => {
    const { bob, alice } = await pair();
    const uploaded = parsePreKeyUpload(
      await wire((await getNextPreKeysNode({ creds: bob.creds, keys: bob.keys }, 2)).node),
    );
    const send = async (text: string, toKeyless: boolean): Promise<WAMessage> => {
      const { skmsg, distribution } = alice.encryptGroupMessage(GROUP, { conversation: text });
      const enc = [];
      if (toKeyless) {
        const [c] = await encryptToDevices(
          alice,
          [{ jid: bob.jid, keys: uploaded }],
          {
            senderKeyDistributionMessage: {
              groupId: GROUP,
              axolotlSenderKeyDistributionMessage: distribution,
            },
          },
          GROUP,
        );
        assert.ok(c);
        enc.push(c.enc);
      }
      enc.push({ type: 'skmsg' as const, ciphertext: skmsg });
      return receive(
        bob,
        incomingMessageNode({
          id: `A${text}`,
          from: GROUP,
          participant: alice.jid,
          senderAlt: alice.lid,
          pushName: 'Alice',
          enc,
        }),
      );
    };
    const first = await send('hi all', true);
    assert.equal(first.messageStubType, undefined, String(first.messageStubParameters));
    assert.equal(first.message?.conversation, 'hi all');
    assert.deepEqual(
      [first.key.remoteJid, first.key.participant, first.key.fromMe],
      [GROUP, alice.jid, false],
    );
    assert.equal((await send('again', false)).message?.conversation, 'again');
    assert.equal((await send('and again', false)).message?.conversation, 'and again');
  });

  it('Baileys cannot read a group message whose key it never received', async () => {
    const { bob, alice } = await pair();
    const { skmsg } = alice.encryptGroupMessage(GROUP, { conversation: 'secret' });
    const got = await receive(
      bob,
      incomingMessageNode({
        id: 'X',
        from: GROUP,
        participant: alice.jid,
        enc: [{ type: 'skmsg', ciphertext: skmsg }],
      }),
    );
    assert.equal(got.message, undefined);
    assert.throws(() => alice.decryptGroupMessage(GROUP, alice.jid, Buffer.from([0x33, 1, 2])), SignalError);
  });
});
