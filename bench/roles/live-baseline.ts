import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  type AuthenticationCreds,
  DisconnectReason,
  initAuthCreds,
  makeWASocket,
  type SignalDataSet,
  type SignalDataTypeMap,
  type SignalKeyStore,
  WA_CERT_DETAILS,
  type WAMessage,
  type WASocket,
} from 'baileys';
import pino from 'pino';
import { Pool } from 'undici';
import { withKeyedStorages } from '../../src/engines/baileys/keyed-storage.ts';
import { webhookHeaders } from '../../src/webhooks/signing.ts';
import type { Handlers } from '../lib/ipc.ts';
import {
  controlPost,
  eachLimited,
  type LiveTarget,
  type MemorySample,
  type ReconnectTiming,
  settledMemory,
  waitUntil,
} from '../lib/live.ts';
import { sleep } from '../lib/stats.ts';

/**
 * The baseline of the live benchmarks: a hand-written Baileys bot, the thing a user would otherwise run. One
 * `makeWASocket` per account on in-memory auth (initAuthCreds + a Map-backed key store), pointed at the same
 * simulator, linked the same way (its QR scanned through the control API, the 515 restart, a new socket), the
 * reconnect loop of Baileys' own example (a new socket at once on every close but logged-out), and each
 * incoming text forwarded as one POST to the benchmark receiver (undici keep-alive pool; signed with the same
 * two signatures so the same receiver counts it) — no store, no outbox, no retry.
 */

interface Bot {
  phone: string;
  instanceId: string;
  creds: AuthenticationCreds;
  keys: SignalKeyStore;
  sock: WASocket | undefined;
  open: boolean;
  /** The first QR code the bot's socket showed; empty until then. */
  qr: string;
  /** Sequence of the last forwarded message (the `sequence` field of the POST body). */
  sequence: number;
  /** Epoch ms of the last close and of the last open. */
  closedAt: number;
  openedAt: number;
}

const bots: Bot[] = [];
let pool: Pool | undefined;
let webhookPath = '/';
let hmacKey = '';
let simUrl = '';
let stopping = false;
/** Whether sockets get parley's keyed key-transaction storage (`--keyed-baseline`). */
let keyed = false;
const logger = pino({ level: 'silent' });

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

/** Forwards one incoming text as a Message-shaped POST to the receiver. */
async function forward(bot: Bot, message: WAMessage): Promise<void> {
  const text = message.message?.conversation ?? message.message?.extendedTextMessage?.text;
  if (!pool || message.key.fromMe || typeof text !== 'string') return;
  const chat = message.key.remoteJid ?? '';
  bot.sequence += 1;
  const body = JSON.stringify({
    type: 'Message',
    event: {
      info: {
        id: message.key.id,
        messageSource: { chat, sender: chat, isFromMe: false, isGroup: false },
        pushName: message.pushName ?? '',
        timestamp: new Date(Number(message.messageTimestamp ?? 0) * 1000).toISOString(),
      },
      message: { conversation: text },
    },
    instanceId: bot.instanceId,
    sequence: bot.sequence,
  });
  const headers = webhookHeaders({
    id: randomUUID(),
    timestampSeconds: Math.floor(Date.now() / 1000),
    body,
    hmacKey,
  });
  const response = await pool.request({ path: webhookPath, method: 'POST', headers, body });
  await response.body.text();
}

/** Opens a socket for `bot`; on a close other than logged-out, opens the next one at once. */
function start(bot: Bot): void {
  const create = () =>
    makeWASocket({
      auth: { creds: bot.creds, keys: bot.keys },
      waWebSocketUrl: simUrl,
      logger,
      markOnlineOnConnect: false,
      syncFullHistory: false,
    });
  const sock = keyed ? withKeyedStorages(create) : create();
  bot.sock = sock;
  sock.ev.on('creds.update', (update) => Object.assign(bot.creds, update));
  sock.ev.on('connection.update', (update) => {
    if (typeof update.qr === 'string' && bot.qr === '') bot.qr = update.qr;
    if (update.connection === 'open') {
      bot.open = true;
      bot.openedAt = Date.now();
    }
    if (update.connection === 'close') {
      bot.open = false;
      bot.closedAt = Date.now();
      const error = update.lastDisconnect?.error as { output?: { statusCode?: number } } | undefined;
      if (!stopping && error?.output?.statusCode !== DisconnectReason.loggedOut) start(bot);
    }
  });
  sock.ev.on('messages.upsert', ({ messages, type }) => {
    if (type !== 'notify') return;
    for (const message of messages) void forward(bot, message).catch(() => undefined);
  });
}

/**
 * Trusts the simulator's root key and opens the receiver pool; → the idle process's memory. `keyedStorages`
 * (`--keyed-baseline`) gives the bot parley's one shared key-transaction storage instead of Baileys' one per
 * socket, to show parley's own cost apart from that fix.
 */
async function boot(args: {
  simUrl: string;
  rootKey: string;
  webhookUrl: string;
  hmacKey: string;
  settleMs: number;
  keyedStorages?: boolean;
}): Promise<MemorySample> {
  WA_CERT_DETAILS.PUBLIC_KEY = Buffer.from(args.rootKey, 'hex');
  keyed = args.keyedStorages === true;
  simUrl = args.simUrl;
  hmacKey = args.hmacKey;
  const target = new URL(args.webhookUrl);
  webhookPath = target.pathname;
  pool = new Pool(target.origin, {
    connections: 8,
    connect: { ca: readFileSync(new URL('../../test/fixtures/tls/cert.pem', import.meta.url), 'utf8') },
  });
  return settledMemory(args.settleMs);
}

/** Links one socket per phone of `target` and waits for each to open; → ms the whole wave took. */
async function login(target: LiveTarget): Promise<{ ms: number }> {
  const started = Date.now();
  await eachLimited(target.phones.length, target.concurrency, async (i) => {
    const bot: Bot = {
      phone: target.phones[i] ?? '',
      instanceId: randomUUID(),
      creds: initAuthCreds(),
      keys: memoryKeys(),
      sock: undefined,
      open: false,
      qr: '',
      sequence: 0,
      closedAt: 0,
      openedAt: 0,
    };
    start(bot);
    await waitUntil(`a QR code for ${bot.phone}`, () => bot.qr !== '', 60_000);
    await controlPost(target.control, '/scan', { code: bot.qr, phone: bot.phone });
    await waitUntil(`${bot.phone} open`, () => bot.open, 120_000);
    bots.push(bot);
  });
  return { ms: Date.now() - started };
}

/** Waits until every socket closed after `since` (epoch ms) and opened again; times are from `since`. */
async function waitBack(args: { since: number; timeoutMs: number }): Promise<ReconnectTiming> {
  await waitUntil(
    'every socket back',
    () => bots.every((bot) => bot.open && bot.closedAt >= args.since && bot.openedAt >= bot.closedAt),
    args.timeoutMs,
    20,
  );
  const backMs = bots.map((bot) => bot.openedAt - args.since).sort((a, b) => a - b);
  return { allBackMs: backMs.at(-1) ?? 0, backMs };
}

/** Commands of the live-baseline role. */
export const liveBaselineHandlers: Handlers = {
  boot,
  login,
  async memory(args: { settleMs: number }) {
    return settledMemory(args.settleMs);
  },
  waitBack,
  async close() {
    stopping = true;
    for (const bot of bots) bot.sock?.end(undefined);
    await sleep(100);
    await pool?.close();
    return null;
  },
};
