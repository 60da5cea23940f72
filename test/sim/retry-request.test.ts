/**
 * A simulated phone that cannot decrypt a message asks the sending device for it again (sim/messaging/
 * retry-request.ts), and a real Baileys 7 client sends it again in a fresh session. The undecryptable message is
 * made the way a killed process makes one: the client's Signal sessions are put back to what they were before
 * its last message, so its next message reuses message keys the phone has already used.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { proto } from 'baileys';
import type { RetryRequestEvent } from '../../sim/messaging/retry-request.ts';
import type { DeviceStanza } from '../../sim/server/session.ts';
import type { Simulator } from '../../sim/simulator.ts';
import {
  type Client,
  control,
  endClient,
  inboxEntry,
  pairClient,
  startTrustedSimulator,
  until,
} from './support.ts';

/** The client's Signal session records (`session:<address>` in its key store), copied. */
function sessions(client: Client): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [key, value] of client.auth.data) {
    if (key.startsWith('session:')) out.set(key, structuredClone(value));
  }
  return out;
}

/** Puts the client's session records back to `saved` (those written since are dropped). */
function restoreSessions(client: Client, saved: Map<string, unknown>): void {
  for (const key of [...client.auth.data.keys()])
    if (key.startsWith('session:')) client.auth.data.delete(key);
  for (const [key, value] of saved) client.auth.data.set(key, structuredClone(value));
}

describe('simulator: a phone that cannot decrypt asks for the message again', () => {
  let sim: Simulator;
  let client: Client;
  const account = '4930555555561';
  const friend = '4930555555562';
  /** What the client sent, by id: its `getMessage` answers the retry from here, as parley's message store does. */
  const sentMessages = new Map<string, proto.IMessage>();
  const requests: RetryRequestEvent[] = [];
  const decryptErrors: { user: { phone: string }; id: string }[] = [];
  /** The client's `<message>` stanzas, counted by message id. */
  const stanzas = new Map<string, number>();
  const inboxOf = (phone: string) => sim.context.accounts.get(phone)?.inbox ?? [];

  before(async () => {
    sim = await startTrustedSimulator();
    await control(sim, 'POST', '/users', { phone: account, pushName: 'Account' });
    await control(sim, 'POST', '/users', { phone: friend, pushName: 'Friend' });
    client = await pairClient(sim, account, undefined, {
      getMessage: async (key) => (key.id ? sentMessages.get(key.id) : undefined),
    });
    sim.context.events.on('retry-request', (event: RetryRequestEvent) => requests.push(event));
    sim.context.events.on('decrypt-error', (event: { user: { phone: string }; id: string }) =>
      decryptErrors.push(event),
    );
    sim.context.events.on('stanza', ({ node }: DeviceStanza) => {
      if (node.tag === 'message' && node.attrs.id)
        stanzas.set(node.attrs.id, (stanzas.get(node.attrs.id) ?? 0) + 1);
    });
  });
  after(async () => {
    await endClient(client);
    await sim.close();
  });

  /** Sends `text` to the friend and waits for it in the friend's inbox; returns its id. */
  async function send(text: string): Promise<string> {
    const landed = inboxEntry(sim, friend, (e) => e.text === text, text);
    const sent = await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { text });
    const id = sent?.key.id;
    assert.ok(id && sent.message);
    sentMessages.set(id, sent.message);
    assert.equal((await landed).id, id);
    return id;
  }

  it('a message on reused keys is asked for again and lands once, sent again in a fresh session', async () => {
    const one = await send('one');
    const before = sessions(client);
    const two = await send('two');
    restoreSessions(client, before);
    const three = await send('three');

    // Baileys sends a message again to all of the friend's devices and its own for each request: the original
    // and two copies. The friend's phone shows the first copy it could decrypt and counts the other.
    await until('both copies sent again', () => (stanzas.get(three) === 3 ? true : undefined));
    await until('the second copy counted', () =>
      inboxOf(friend).find((e) => e.id === three)?.copies === 1 ? true : undefined,
    );
    assert.deepEqual(
      inboxOf(friend)
        .filter((e) => e.type === 'text')
        .map((e) => [e.id, e.text, e.copies ?? 0]),
      [
        [one, 'one', 0],
        [two, 'two', 0],
        [three, 'three', 1],
      ],
      'each message shown once, none lost',
    );
    // The friend's phone and the account's own phone (the deviceSentMessage copy) both failed on reused keys,
    // once each, and each asked the sending device once, without keys (a first request).
    assert.deepEqual(
      decryptErrors.map((e) => [e.user.phone, e.id]).sort(),
      [
        [account, three],
        [friend, three],
      ].sort(),
    );
    assert.deepEqual(
      requests.map((r) => [r.user.phone, r.id, r.device, r.count, r.keys]).sort(),
      [
        [account, three, `${account}:1@s.whatsapp.net`, 1, false],
        [friend, three, `${account}:1@s.whatsapp.net`, 1, false],
      ].sort(),
    );
  });

  it('the next message decrypts without a retry: the fresh session holds', async () => {
    const asked = requests.length;
    const errors = decryptErrors.length;
    await send('four');
    assert.equal(requests.length, asked);
    assert.equal(decryptErrors.length, errors);
  });
});
