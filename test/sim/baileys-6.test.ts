/**
 * Unmodified Baileys 6.7.21 (the dev dependency `baileys-6`, the line most deployments still run) against an
 * in-process simulator, ten fresh pairings in a row: each connects with new credentials, shows a QR that a
 * simulated phone scans through the control API (POST /control/scan), restarts on the 515, logs in, sends a
 * text that the simulated contact's phone decrypts (its inbox through GET /control/users/:phone/inbox), and
 * receives a text the contact sends (POST /control/messages) as a messages.upsert. 6.7.21 derives its Noise
 * transport keys after it has sent its finish, asynchronously; the simulator's first-frame delay is what lets it
 * through (docs/decisions/0040-simulator-serves-baileys-6.md). Waits are event waits with a time-out.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  type AuthenticationCreds,
  type BaileysEventMap,
  type ConnectionState,
  initAuthCreds,
  makeWASocket,
  type SignalDataSet,
  type SignalDataTypeMap,
  type SignalKeyStore,
  type WAMessage,
  type WASocket,
} from 'baileys-6';
import pino from 'pino';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';
import { control, inboxEntry, WAIT_MS } from './support.ts';

/** How many fresh pairings the suite runs, one after the other. */
const PAIRINGS = 10;

/** A Baileys 6 socket, its connection updates so far, and its in-memory credentials. */
interface Client6 {
  sock: WASocket;
  updates: Partial<ConnectionState>[];
  creds: AuthenticationCreds;
}

/** An in-memory Signal key store, as test/sim/support.ts keeps one for Baileys 7. */
function memoryKeys(): SignalKeyStore {
  const data = new Map<string, unknown>();
  return {
    async get<T extends keyof SignalDataTypeMap>(type: T, ids: string[]) {
      const out: { [id: string]: SignalDataTypeMap[T] } = {};
      for (const id of ids) {
        const value = data.get(`${type}:${id}`);
        if (value !== undefined) out[id] = value as SignalDataTypeMap[T];
      }
      return out;
    },
    async set(update: SignalDataSet) {
      for (const [type, entries] of Object.entries(update)) {
        for (const [id, value] of Object.entries(entries ?? {})) {
          if (value === null || value === undefined) data.delete(`${type}:${id}`);
          else data.set(`${type}:${id}`, value);
        }
      }
    },
  };
}

/** Opens a Baileys 6 socket to `sim` with `creds` and `keys`; credential updates are applied to `creds`. */
function connect6(sim: Simulator, creds: AuthenticationCreds, keys: SignalKeyStore): Client6 {
  const sock = makeWASocket({
    auth: { creds, keys },
    waWebSocketUrl: sim.url,
    logger: pino({ level: process.env.SIM_TEST_LOG ?? 'silent' }),
    markOnlineOnConnect: false,
    syncFullHistory: false,
    connectTimeoutMs: 10_000,
  });
  const updates: Partial<ConnectionState>[] = [];
  sock.ev.on('connection.update', (u) => updates.push(u));
  sock.ev.on('creds.update', (u) => Object.assign(creds, u));
  return { sock, updates, creds };
}

/** Resolves with the first `event` payload `predicate` accepts; rejects after {@link WAIT_MS} naming `what`. */
function waitFor<E extends keyof BaileysEventMap>(
  client: Client6,
  event: E,
  predicate: (payload: BaileysEventMap[E]) => boolean,
  what: string,
): Promise<BaileysEventMap[E]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.sock.ev.off(event, listener);
      reject(new Error(`timed out after ${WAIT_MS} ms waiting for ${what}`));
    }, WAIT_MS);
    const listener = (payload: BaileysEventMap[E]) => {
      if (!predicate(payload)) return;
      clearTimeout(timer);
      client.sock.ev.off(event, listener);
      resolve(payload);
    };
    client.sock.ev.on(event, listener);
  });
}

/** The first connection update (already logged or next) that `predicate` accepts. */
function waitForUpdate(
  client: Client6,
  predicate: (u: Partial<ConnectionState>) => boolean,
  what: string,
): Promise<Partial<ConnectionState>> {
  const seen = client.updates.find(predicate);
  if (seen) return Promise.resolve(seen);
  return waitFor(client, 'connection.update', predicate, what);
}

/** Status code and message of the error that closed a socket, for assertion messages. */
function closeReason(update: Partial<ConnectionState>): { code?: number; message?: string } {
  const error = update.lastDisconnect?.error as
    | { message?: string; output?: { statusCode?: number } }
    | undefined;
  return { code: error?.output?.statusCode, message: error?.message };
}

/** Rejects as soon as `client` closes, naming the close reason; for racing against a wait. */
function failOnClose(client: Client6, during: string): Promise<never> {
  return waitForUpdate(client, (u) => u.connection === 'close', `a close during ${during}`).then((u) => {
    throw new Error(`socket closed during ${during}: ${JSON.stringify(closeReason(u))}`);
  });
}

/** The text of a Baileys message: a plain conversation or an extended text. */
function textOf(message: WAMessage): string | null | undefined {
  return message.message?.conversation ?? message.message?.extendedTextMessage?.text;
}

/** Ends a socket and waits for its close (a no-op when it already closed). */
async function end(client: Client6): Promise<void> {
  if (client.updates.some((u) => u.connection === 'close')) return;
  const closed = waitForUpdate(client, (u) => u.connection === 'close', 'close');
  client.sock.end(undefined);
  await closed;
}

describe('simulator: unmodified Baileys 6.7.21 pairs, logs in, sends and receives, ten times in a row', () => {
  let sim: Simulator;
  const contact = '4930670000000';
  /** The contact's LID chat, `…@lid`: the address its phone writes from, which Baileys 6 keeps as remoteJid. */
  let contactLid = '';
  const open: Client6[] = [];

  before(async () => {
    sim = await startSimulator();
    const created = await control(sim, 'POST', '/users', { phone: contact, pushName: 'Contact' });
    assert.equal(created.status, 201);
    contactLid = (created.body as { lidJid: string }).lidJid;
    assert.match(contactLid, /^[0-9]+@lid$/);
  });
  after(async () => {
    for (const client of open) await end(client);
    await sim.close();
  });

  for (let round = 1; round <= PAIRINGS; round++) {
    it(`pairing ${round} of ${PAIRINGS}: QR scan, 515, login, a text from the contact, an answer`, async (t) => {
      const account = `49306700001${String(round).padStart(2, '0')}`;
      assert.equal(
        (await control(sim, 'POST', '/users', { phone: account, pushName: `Shop ${round}` })).status,
        201,
      );
      const creds = initAuthCreds();
      const keys = memoryKeys();
      const retries: unknown[] = [];
      const onRetry = (retry: unknown) => retries.push(retry);
      sim.context.events.on('retry', onRetry);
      t.after(() => sim.context.events.off('retry', onRetry));

      // Registration socket: the QR, scanned by the account's phone through the control API, then the 515.
      const first = connect6(sim, creds, keys);
      open.push(first);
      const { qr } = await Promise.race([
        waitForUpdate(first, (u) => typeof u.qr === 'string', 'a QR code'),
        failOnClose(first, 'registration'),
      ]);
      const restarted = waitForUpdate(first, (u) => u.connection === 'close', 'the 515 close');
      const scan = await control(sim, 'POST', '/scan', { code: qr, phone: account });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      assert.equal((scan.body as { jid: string }).jid, `${account}:1@s.whatsapp.net`);
      assert.equal(closeReason(await restarted).code, 515);
      assert.equal(creds.me?.id, `${account}:1@s.whatsapp.net`);

      // Login socket with the credentials the pairing left.
      const client = connect6(sim, creds, keys);
      open.push(client);
      await Promise.race([
        waitForUpdate(client, (u) => u.connection === 'open', 'open after the restart'),
        failOnClose(client, 'login'),
      ]);

      // The contact writes first, as a customer writes to a shop: a pkmsg from its LID, which Baileys 6
      // decrypts and emits as messages.upsert.
      const question = `is order ${round} ready?`;
      const upsert = waitFor(
        client,
        'messages.upsert',
        (u) => u.messages.some((m) => textOf(m) === question),
        `"${question}" at Baileys`,
      );
      const posted = await control(sim, 'POST', '/messages', { from: contact, to: account, text: question });
      assert.equal(posted.status, 201, JSON.stringify(posted.body));
      const { id } = posted.body as { id: string };
      const { messages, type } = await Promise.race([upsert, failOnClose(client, 'the receive')]);
      assert.equal(type, 'notify');
      const message = messages.find((m) => textOf(m) === question);
      assert.equal(message?.key.id, id);
      assert.equal(message?.key.fromMe, false);
      assert.equal(message?.key.remoteJid, contactLid);
      assert.equal(message?.pushName, 'Contact');

      // The answer, to the contact's phone number: its phone decrypts it into its inbox.
      const text = `order ${round} ships today`;
      const delivered = inboxEntry(sim, contact, (e) => e.text === text, 'the answer');
      const sent = await client.sock.sendMessage(`${contact}@s.whatsapp.net`, { text });
      const entry = await Promise.race([delivered, failOnClose(client, 'the send')]);
      assert.equal(entry.id, sent?.key.id);
      assert.equal(entry.from, account);
      assert.equal(entry.fromDevice, 1);
      assert.equal(entry.type, 'text');
      const inbox = await control(sim, 'GET', `/users/${contact}/inbox`);
      assert.equal(inbox.status, 200);
      assert.ok(
        (inbox.body as InboxEntry[]).some((e) => e.id === sent?.key.id && e.text === text),
        'the contact inbox over the control API holds the answer',
      );
      assert.deepEqual(retries, [], 'both texts decrypted at the first try');

      await end(client);
    });
  }
});

describe('simulator: the first-frame delay', () => {
  it('holds the first frame after the handshake for firstFrameDelayMs; rejects a bad value', async () => {
    await assert.rejects(startSimulator({ firstFrameDelayMs: -1 }), RangeError);
    await assert.rejects(startSimulator({ firstFrameDelayMs: 2.5 }), RangeError);
    const delayMs = 400;
    const sim = await startSimulator({ firstFrameDelayMs: delayMs });
    try {
      // The connection log records the client payload the moment the Noise finish is read.
      const log = sim.context.connections;
      const identified = log.identified.bind(log);
      const finished = new Promise<number>((resolve) => {
        log.identified = (...args) => {
          resolve(Date.now());
          identified(...args);
        };
      });
      const client = connect6(sim, initAuthCreds(), memoryKeys());
      await waitForUpdate(client, (u) => typeof u.qr === 'string', 'a QR code');
      const elapsed = Date.now() - (await finished);
      assert.ok(elapsed >= delayMs - 5, `the QR came ${elapsed} ms after the finish, not ${delayMs} or more`);
      await end(client);
    } finally {
      await sim.close();
    }
  });
});
