/**
 * Real Baileys 7 clients against an in-process simulator: `makeWASocket` with in-memory credentials
 * (initAuthCreds + a Map-backed key store), pointed at the simulator with `waWebSocketUrl`, trusting its root
 * key through `WA_CERT_DETAILS.PUBLIC_KEY`. Waits are event waits with a time-out, never sleeps.
 */
import {
  type AuthenticationCreds,
  type BaileysEventMap,
  type ConnectionState,
  initAuthCreds,
  makeWASocket,
  type SignalDataSet,
  type SignalDataTypeMap,
  type SignalKeyStore,
  type UserFacingSocketConfig,
  WA_CERT_DETAILS,
  type WASocket,
} from 'baileys';
import pino from 'pino';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';

/** Default time-out of a wait, in milliseconds. */
export const WAIT_MS = 15_000;

/** Credentials and keys of one Baileys client, kept across its sockets (as a store would keep them). */
export interface ClientAuth {
  creds: AuthenticationCreds;
  keys: SignalKeyStore;
  data: Map<string, unknown>;
}

/** Fresh in-memory credentials. */
export function memoryAuth(): ClientAuth {
  const data = new Map<string, unknown>();
  const keys: SignalKeyStore = {
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
  return { creds: initAuthCreds(), keys, data };
}

/** Starts a simulator and makes this process's Baileys trust its root key. */
export async function startTrustedSimulator(): Promise<Simulator> {
  const sim = await startSimulator();
  WA_CERT_DETAILS.PUBLIC_KEY = Buffer.from(sim.rootKey.toString('hex'), 'hex');
  return sim;
}

/** A Baileys socket plus a log of its connection updates. */
export interface Client {
  sock: WASocket;
  updates: Partial<ConnectionState>[];
  auth: ClientAuth;
}

/** Socket settings a test may add. */
export interface ClientOptions {
  qrTimeout?: number;
  keepAliveIntervalMs?: number;
  /** Answers the platform's retry receipts (Baileys sends the message again only if this finds it). */
  getMessage?: UserFacingSocketConfig['getMessage'];
}

/** Opens a Baileys socket to the simulator with `auth`; credential updates are applied to `auth.creds`. */
export function connectClient(
  sim: Pick<Simulator, 'url'>,
  auth: ClientAuth,
  options: ClientOptions = {},
): Client {
  const sock = makeWASocket({
    auth: { creds: auth.creds, keys: auth.keys },
    waWebSocketUrl: sim.url,
    logger: pino({ level: process.env.SIM_TEST_LOG ?? 'silent' }),
    markOnlineOnConnect: false,
    syncFullHistory: false,
    connectTimeoutMs: 10_000,
    ...(options.qrTimeout ? { qrTimeout: options.qrTimeout } : {}),
    ...(options.keepAliveIntervalMs ? { keepAliveIntervalMs: options.keepAliveIntervalMs } : {}),
    ...(options.getMessage ? { getMessage: options.getMessage } : {}),
  });
  const updates: Partial<ConnectionState>[] = [];
  sock.ev.on('connection.update', (u) => updates.push(u));
  sock.ev.on('creds.update', (u) => Object.assign(auth.creds, u));
  return { sock, updates, auth };
}

/**
 * Resolves with the first `event` payload for which `predicate` holds (also checking `past` payloads already
 * seen); rejects after `ms` naming what it waited for.
 */
export function waitForEvent<E extends keyof BaileysEventMap>(
  client: Client,
  event: E,
  predicate: (payload: BaileysEventMap[E]) => boolean,
  what: string,
  ms = WAIT_MS,
): Promise<BaileysEventMap[E]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.sock.ev.off(event, listener);
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    const listener = (payload: BaileysEventMap[E]) => {
      if (!predicate(payload)) return;
      clearTimeout(timer);
      client.sock.ev.off(event, listener);
      resolve(payload);
    };
    client.sock.ev.on(event, listener);
  });
}

/** Waits for the next connection update matching `predicate`, or one already logged. */
export function waitForUpdate(
  client: Client,
  predicate: (u: Partial<ConnectionState>) => boolean,
  what: string,
  ms = WAIT_MS,
): Promise<Partial<ConnectionState>> {
  const seen = client.updates.find(predicate);
  if (seen) return Promise.resolve(seen);
  return waitForEvent(client, 'connection.update', predicate, what, ms);
}

/** Status code of the error that closed the socket (Boom's output.statusCode), if any. */
export function closeCode(update: Partial<ConnectionState>): number | undefined {
  const error = update.lastDisconnect?.error as { output?: { statusCode?: number } } | undefined;
  return error?.output?.statusCode;
}

/** Ends a socket and waits for its close. */
export async function endClient(client: Client): Promise<void> {
  if (client.updates.some((u) => u.connection === 'close')) return;
  const closed = waitForUpdate(client, (u) => u.connection === 'close', 'close');
  client.sock.end(undefined);
  await closed;
}

/**
 * Pairs a fresh client with account `phone`: connects, waits for the first QR, scans it through the
 * simulator's pairing (as POST /control/scan does), waits for the 515 close, reconnects with the new
 * credentials and waits for `open`. Returns the open client.
 */
export async function pairClient(
  sim: Simulator,
  phone: string,
  auth = memoryAuth(),
  options: Omit<ClientOptions, 'qrTimeout'> = {},
): Promise<Client> {
  const first = connectClient(sim, auth);
  const { qr } = await waitForUpdate(first, (u) => typeof u.qr === 'string', 'a QR code');
  const restarted = waitForUpdate(first, (u) => u.connection === 'close', 'the 515 close');
  await sim.context.pairing.scan(qr ?? '', phone);
  const closed = await restarted;
  if (closeCode(closed) !== 515) throw new Error(`pairing ended with ${closeCode(closed)}, not 515`);
  const second = connectClient(sim, auth, options);
  await waitForUpdate(second, (u) => u.connection === 'open', 'open after the restart');
  return second;
}

/** JSON request to the simulator's control API; resolves with status and parsed body. */
export async function control(
  sim: Simulator,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${sim.control}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** Re-checks `check` every 20 ms until it returns a value other than undefined; rejects after `ms` naming `what`. */
export function until<T>(what: string, check: () => T | undefined, ms = WAIT_MS): Promise<T> {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const tick = () => {
      const value = check();
      if (value !== undefined) resolve(value);
      else if (Date.now() > deadline) reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      else setTimeout(tick, 20);
    };
    tick();
  });
}

/** Waits until `phone`'s inbox holds an entry matching `predicate` (published on the simulator's events). */
export function inboxEntry(
  sim: Simulator,
  phone: string,
  predicate: (e: InboxEntry) => boolean,
  what: string,
): Promise<InboxEntry> {
  const seen = sim.context.accounts.get(phone)?.inbox.find(predicate);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      sim.context.events.off('inbox', listener);
      reject(new Error(`timed out waiting for ${what} in ${phone}'s inbox`));
    }, WAIT_MS);
    const listener = ({ user, entry }: { user: { phone: string }; entry: InboxEntry }) => {
      if (user.phone !== phone || !predicate(entry)) return;
      clearTimeout(timer);
      sim.context.events.off('inbox', listener);
      resolve(entry);
    };
    sim.context.events.on('inbox', listener);
  });
}
