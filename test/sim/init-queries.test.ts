import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BinaryNode } from 'baileys';
import type { DeviceStanza } from '../../sim/server/session.ts';
import type { Simulator } from '../../sim/simulator.ts';
import {
  closeCode,
  connectClient,
  control,
  endClient,
  memoryAuth,
  startTrustedSimulator,
  WAIT_MS,
  waitForUpdate,
} from './support.ts';

/**
 * The queries Baileys 7 sends when a socket opens (Socket/chats.js executeInitQueries: fetchProps,
 * fetchBlocklist, fetchPrivacySettings, plus pre-key and app-state queries) each get an answer from the
 * simulator, matched by iq id on Baileys' side, so none waits for its query time-out.
 */
describe('simulator answers every iq Baileys sends at login', () => {
  let sim: Simulator;
  before(async () => {
    sim = await startTrustedSimulator();
  });
  after(async () => {
    await sim.close();
  });

  it('abt, blocklist and privacy are answered with results; fetchPrivacySettings resolves', async () => {
    await control(sim, 'POST', '/users', { phone: '5511900000031' });
    const received = new Map<string, BinaryNode>();
    sim.context.events.on('iq', (e: DeviceStanza) => {
      if (e.node.attrs.id) received.set(e.node.attrs.id, e.node);
    });
    const auth = memoryAuth();
    const first = connectClient(sim, auth);
    const { qr } = await waitForUpdate(first, (u) => typeof u.qr === 'string', 'a QR code');
    const restarted = waitForUpdate(first, (u) => u.connection === 'close', 'the 515 close');
    await sim.context.pairing.scan(qr ?? '', '5511900000031');
    assert.equal(closeCode(await restarted), 515);
    received.clear();
    // The logged-in socket: every iq answer it receives, by id, from its first frame on.
    const client = connectClient(sim, auth);
    const answers = new Map<string, BinaryNode>();
    const ws = client.sock.ws as unknown as {
      on(event: 'frame', listener: (frame: BinaryNode) => void): void;
    };
    ws.on('frame', (frame: BinaryNode) => {
      if (frame.tag === 'iq' && frame.attrs.id && frame.attrs.type !== 'get' && frame.attrs.type !== 'set') {
        answers.set(frame.attrs.id, frame);
      }
    });
    await waitForUpdate(client, (u) => u.connection === 'open', 'open after the restart');
    const initXmlns = ['abt', 'blocklist', 'privacy'];
    const deadline = Date.now() + WAIT_MS;
    await new Promise<void>((resolve, reject) => {
      const check = (): void => {
        const sentInit = initXmlns.every((x) => [...received.values()].some((n) => n.attrs.xmlns === x));
        const allAnswered = [...received.keys()].every((id) => answers.has(id));
        if (sentInit && allAnswered) {
          resolve();
        } else if (Date.now() > deadline) {
          const open = [...received.values()].filter((n) => !answers.has(n.attrs.id ?? ''));
          reject(new Error(`unanswered after ${WAIT_MS} ms: ${open.map((n) => n.attrs.xmlns).join(', ')}`));
        } else {
          setTimeout(check, 5);
        }
      };
      check();
    });
    for (const xmlns of initXmlns) {
      const sent = [...received.values()].find((n) => n.attrs.xmlns === xmlns);
      assert.ok(sent?.attrs.id, `Baileys sent an ${xmlns} iq`);
      const answer = answers.get(sent.attrs.id);
      assert.equal(answer?.attrs.type, 'result', `${xmlns} answered with a result`);
      const content = Array.isArray(answer?.content) ? answer.content : [];
      assert.equal(content[0]?.tag, xmlns === 'abt' ? 'props' : xmlns === 'blocklist' ? 'list' : 'privacy');
    }
    assert.deepEqual(await client.sock.fetchPrivacySettings(true), {
      last: 'all',
      online: 'all',
      profile: 'all',
      status: 'contacts',
      groupadd: 'all',
      readreceipts: 'all',
      calladd: 'all',
    });
    assert.deepEqual(await client.sock.fetchBlocklist(), []);
    await endClient(client);
  });
});
