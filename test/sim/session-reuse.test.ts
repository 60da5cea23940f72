/**
 * A reply to a user who has just sent a first message reuses the Signal session that user's pkmsg set up, as on
 * the real platform: Baileys' answer is a `msg` (whisper) on that session, it fetches no new pre-key bundle for
 * the user, and libsignal does not close the open session ("Closing open session in favor of incoming prekey
 * bundle"). Observed at the simulator: the `<enc type>` in Baileys' outgoing `<message>` and the `<iq
 * xmlns=encrypt><key><user jid/></key>` fetches it sends.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren, jidDecode } from 'baileys';
import type { DeviceStanza } from '../../sim/server/session.ts';
import { parseOutgoingMessage } from '../../sim/signal/index.ts';
import type { Simulator } from '../../sim/simulator.ts';
import {
  type Client,
  control,
  endClient,
  pairClient,
  startTrustedSimulator,
  waitForEvent,
} from './support.ts';

/** JIDs whose pre-key bundles a device asked for (`<iq xmlns=encrypt type=get><key><user jid/>`). */
function keyFetches(node: BinaryNode): string[] {
  if (node.attrs.xmlns !== 'encrypt' || node.attrs.type !== 'get') return [];
  return getBinaryNodeChildren(getBinaryNodeChild(node, 'key'), 'user').map((u) => u.attrs.jid ?? '');
}

describe('simulator: a reply reuses the session a first message set up', () => {
  let sim: Simulator;
  let client: Client;
  const account = '4930555555551';
  const friend = '4930555555552';
  const fetched: string[] = [];
  const outgoing: BinaryNode[] = [];
  const consoleLines: string[] = [];
  const originalConsole = { info: console.info, log: console.log, warn: console.warn };
  before(async () => {
    sim = await startTrustedSimulator();
    await control(sim, 'POST', '/users', { phone: account, pushName: 'Account' });
    await control(sim, 'POST', '/users', { phone: friend, pushName: 'Friend' });
    client = await pairClient(sim, account);
    sim.context.events.on('iq', ({ node }: DeviceStanza) => fetched.push(...keyFetches(node)));
    sim.context.events.on('stanza', ({ node }: DeviceStanza) => {
      if (node.tag === 'message') outgoing.push(node);
    });
    // libsignal reports session changes on the console; capture what it says during the exchange.
    const capture = (...args: unknown[]) => {
      consoleLines.push(args.map(String).join(' '));
    };
    console.info = capture;
    console.log = capture;
    console.warn = capture;
  });
  after(async () => {
    Object.assign(console, originalConsole);
    await endClient(client);
    await sim.close();
  });

  it("a user's first message is a pkmsg; Baileys' reply is a msg on that session, with no key fetch", async () => {
    const friendUser = sim.context.accounts.get(friend);
    assert.ok(friendUser);
    const friendJids = new Set([`${friend}@s.whatsapp.net`, `${friendUser.lid}@lid`]);
    const arrived = waitForEvent(
      client,
      'messages.upsert',
      (u) => u.messages.some((m) => m.message?.conversation === 'first contact'),
      'the first message at Baileys',
    );
    await control(sim, 'POST', '/messages', { from: friend, to: account, text: 'first contact' });
    const first = (await arrived).messages.find((m) => m.message?.conversation === 'first contact');
    assert.ok(first);
    // The platform names the sender by LID, with the phone JID beside it.
    assert.equal(first.key.remoteJid, `${friendUser.lid}@lid`);
    assert.equal(first.key.remoteJidAlt, `${friend}@s.whatsapp.net`);
    assert.ok(
      [...client.auth.data.keys()].includes(`session:${friendUser.lid}_1.0`),
      'Baileys keyed the session the pkmsg set up by LID',
    );

    const sent = new Promise<BinaryNode>((resolve) => {
      const listener = ({ node }: DeviceStanza) => {
        if (node.tag !== 'message') return;
        sim.context.events.off('stanza', listener);
        resolve(node);
      };
      sim.context.events.on('stanza', listener);
    });
    const inbox = new Promise<{ text?: string }>((resolve) => {
      const listener = ({ user, entry }: { user: { phone: string }; entry: { text?: string } }) => {
        if (user.phone !== friend || entry.text !== 'first reply') return;
        sim.context.events.off('inbox', listener);
        resolve(entry);
      };
      sim.context.events.on('inbox', listener);
    });
    await client.sock.sendMessage(first.key.remoteJid ?? '', { text: 'first reply' }, { quoted: first });
    const reply = parseOutgoingMessage(await sent);
    const toFriend = reply.encs.filter((e) =>
      friendJids.has(`${jidDecode(e.jid)?.user}@${jidDecode(e.jid)?.server}`),
    );
    assert.deepEqual(
      toFriend.map((e) => [e.jid, e.type]),
      [[`${friendUser.lid}@lid`, 'msg']],
      'one whisper message to the phone, on the existing session',
    );
    assert.deepEqual(
      fetched.filter((jid) => friendJids.has(`${jidDecode(jid)?.user}@${jidDecode(jid)?.server}`)),
      [],
      'no pre-key bundle fetched for the user',
    );
    assert.equal((await inbox).text, 'first reply', 'the phone decrypted the reply');
    assert.deepEqual(
      consoleLines.filter((l) => /closing/i.test(l)),
      [],
      'libsignal closed no session',
    );
  });
});

describe('simulator: a reply reuses sessions when the user has a second device', () => {
  let sim: Simulator;
  let client: Client;
  let friendClient: Client;
  const account = '4930555555561';
  const friend = '4930555555562';
  const fetched: string[] = [];
  before(async () => {
    sim = await startTrustedSimulator();
    await control(sim, 'POST', '/users', { phone: account, pushName: 'Account' });
    await control(sim, 'POST', '/users', { phone: friend, pushName: 'Friend' });
    client = await pairClient(sim, account);
    friendClient = await pairClient(sim, friend);
    sim.context.events.on('iq', ({ node }: DeviceStanza) => fetched.push(...keyFetches(node)));
  });
  after(async () => {
    await endClient(client);
    await endClient(friendClient);
    await sim.close();
  });

  /** The next `<message>` a device of `phone` sends, parsed. */
  function nextMessage(phone: string) {
    return new Promise<ReturnType<typeof parseOutgoingMessage>>((resolve) => {
      const listener = ({ user, node }: DeviceStanza) => {
        if (node.tag !== 'message' || user.phone !== phone) return;
        sim.context.events.off('stanza', listener);
        resolve(parseOutgoingMessage(node));
      };
      sim.context.events.on('stanza', listener);
    });
  }

  it("the reply reuses the phone's session and starts one only with the new companion; its answer reuses ours", async () => {
    const accountLid = sim.context.accounts.get(account)?.lid;
    const friendLid = sim.context.accounts.get(friend)?.lid;
    assert.ok(accountLid && friendLid);
    const arrived = waitForEvent(
      client,
      'messages.upsert',
      (u) => u.messages.some((m) => m.message?.conversation === 'from my phone'),
      'the first message at Baileys',
    );
    await control(sim, 'POST', '/messages', { from: friend, to: account, text: 'from my phone' });
    const first = (await arrived).messages.find((m) => m.message?.conversation === 'from my phone');
    assert.equal(first?.key.remoteJid, `${friendLid}@lid`);

    fetched.length = 0;
    const replySent = nextMessage(account);
    // The companion acknowledges the reply with a receipt once it decrypted it.
    const receipts = new Set<string>();
    let receiptSeen: (() => void) | undefined;
    const onReceipt = ({ user, device, node }: DeviceStanza) => {
      if (node.tag !== 'receipt' || user.phone !== friend || device.id !== 1 || node.attrs.type === 'retry')
        return;
      receipts.add(node.attrs.id ?? '');
      receiptSeen?.();
    };
    sim.context.events.on('stanza', onReceipt);
    await client.sock.sendMessage(first?.key.remoteJid ?? '', { text: 'reply to both' });
    const reply = await replySent;
    const toFriend = reply.encs
      .filter((e) => jidDecode(e.jid)?.user === friendLid)
      .map((e) => [e.jid, e.type])
      .sort();
    assert.deepEqual(toFriend, [
      [`${friendLid}:1@lid`, 'pkmsg'],
      [`${friendLid}@lid`, 'msg'],
    ]);
    assert.deepEqual(
      fetched.filter((jid) => jidDecode(jid)?.user === friendLid || jidDecode(jid)?.user === friend),
      [`${friendLid}:1@lid`],
      "only the companion's bundle, never the phone's",
    );
    await new Promise<void>((resolve) => {
      receiptSeen = () => {
        if (receipts.has(reply.id)) resolve();
      };
      receiptSeen();
    });
    sim.context.events.off('stanza', onReceipt);
    assert.ok(
      [...friendClient.auth.data.keys()].includes(`session:${accountLid}_1.1`),
      "the companion keyed the session with the account's device by LID",
    );
    // The companion answers in the chat (by LID) on the session that pkmsg set up.
    fetched.length = 0;
    const answerSent = nextMessage(friend);
    await friendClient.sock.sendMessage(`${accountLid}@lid`, { text: 'answer from the companion' });
    const answer = await answerSent;
    assert.deepEqual(
      answer.encs.filter((e) => e.jid === `${accountLid}:1@lid`).map((e) => e.type),
      ['msg'],
    );
    assert.ok(
      !fetched.includes(`${accountLid}:1@lid`),
      `no bundle fetched for the device that just wrote (fetched ${fetched.join()})`,
    );
  });
});
