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
