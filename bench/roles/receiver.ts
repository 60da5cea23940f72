import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Handlers } from '../lib/ipc.ts';
import { type Percentiles, percentiles } from '../lib/stats.ts';

/**
 * The webhook receiver of the delivery benchmarks, in a process of its own: an HTTPS server with the test
 * certificate (`test/fixtures/tls/`, CN=localhost, SAN 127.0.0.1) that checks both signatures of
 * docs/decisions/0006-signatures.md on every POST, answers 200 and records what a receiver cares about: every event
 * id once (duplicates and bad signatures counted), per-instance order, and the event-to-receipt latency (receipt time
 * minus the event's own `event.info.timestamp`, both from this machine's clock).
 */

const tls = (name: string) => readFileSync(new URL(`../../test/fixtures/tls/${name}`, import.meta.url));

/** What the receiver has seen since the last reset. */
export interface ReceiverStats {
  /** POSTs received (duplicates included). */
  received: number;
  /** Distinct `webhook-id`s. */
  unique: number;
  duplicates: number;
  /** Requests whose `x-hmac-signature` or `webhook-signature` did not verify. */
  badSignatures: number;
  /** Events that arrived with a lower `sequence` than an earlier one of the same instance. */
  outOfOrder: number;
  /** Epoch ms of the first and last receipt (0 when none). */
  firstAt: number;
  lastAt: number;
  /** Epoch ms of the earliest event timestamp seen (0 when none). */
  firstEventAt: number;
  /** Event-to-receipt latency, ms. */
  latency: Percentiles;
}

let server: Server | undefined;
let url = '';
let hmacKey = Buffer.alloc(0);
let ids = new Set<string>();
let latencies: number[] = [];
let lastSequence = new Map<string, number>();
/** Counters of one measured phase, all zero. */
function freshStats() {
  return {
    received: 0,
    duplicates: 0,
    badSignatures: 0,
    outOfOrder: 0,
    firstAt: 0,
    lastAt: 0,
    firstEventAt: 0,
  };
}
let stats = freshStats();
let waiters: { count: number; resolve: () => void }[] = [];

function reset(): void {
  ids = new Set();
  latencies = [];
  lastSequence = new Map();
  stats = freshStats();
}

function verified(headers: IncomingMessage['headers'], body: Buffer): boolean {
  const hex = headers['x-hmac-signature'];
  const std = headers['webhook-signature'];
  if (typeof hex !== 'string' || typeof std !== 'string') return false;
  const expectedHex = createHmac('sha256', hmacKey).update(body).digest('hex');
  const expectedStd = `v1,${createHmac('sha256', hmacKey)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.`)
    .update(body)
    .digest('base64')}`;
  const same = (a: string, b: string) =>
    a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
  return same(hex, expectedHex) && same(std, expectedStd);
}

function record(req: IncomingMessage, body: Buffer): void {
  const now = Date.now();
  stats.received += 1;
  if (stats.firstAt === 0) stats.firstAt = now;
  stats.lastAt = now;
  if (!verified(req.headers, body)) {
    stats.badSignatures += 1;
    return;
  }
  const id = String(req.headers['webhook-id']);
  if (ids.has(id)) {
    stats.duplicates += 1;
    return;
  }
  ids.add(id);
  const payload = JSON.parse(body.toString('utf8')) as {
    instanceId: string;
    sequence: number;
    event: { info?: { timestamp?: string } };
  };
  const at = Date.parse(payload.event.info?.timestamp ?? '');
  if (Number.isFinite(at)) {
    latencies.push(now - at);
    if (stats.firstEventAt === 0 || at < stats.firstEventAt) stats.firstEventAt = at;
  }
  const previous = lastSequence.get(payload.instanceId) ?? 0;
  if (payload.sequence < previous) stats.outOfOrder += 1;
  else lastSequence.set(payload.instanceId, payload.sequence);
  if (waiters.length > 0) {
    const ready = waiters.filter((w) => ids.size >= w.count);
    waiters = waiters.filter((w) => ids.size < w.count);
    for (const waiter of ready) waiter.resolve();
  }
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    record(req, Buffer.concat(chunks));
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 });
    res.end('ok');
  });
}

function snapshot(): ReceiverStats {
  return { ...stats, unique: ids.size, latency: percentiles(latencies) };
}

/** Commands of the receiver role. */
export const receiverHandlers: Handlers = {
  /** Starts listening on 127.0.0.1 (a free port); `hmacKey` verifies the signatures. → `{ url }`. */
  async start(args: { hmacKey: string }) {
    hmacKey = Buffer.from(args.hmacKey, 'utf8');
    const listening = createServer({ cert: tls('cert.pem'), key: tls('key.pem') }, handle);
    listening.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
    server = listening;
    const { port } = listening.address() as AddressInfo;
    url = `https://127.0.0.1:${port}/hook`;
    return { url };
  },
  /** The URL given by `start`. */
  async url() {
    if (!server) throw new Error('the receiver has not started');
    return { url };
  },
  async reset() {
    reset();
    return null;
  },
  async stats() {
    return snapshot();
  },
  /** Which of `ids` (`webhook-id`s) have not arrived, with a valid signature, since the last reset. → string[]. */
  async missing(args: { ids: string[] }) {
    return args.ids.filter((id) => !ids.has(id));
  },
  /** Resolves with the stats once `count` distinct events arrived, or after `timeoutMs` with what arrived. */
  async waitFor(args: { count: number; timeoutMs: number }) {
    if (ids.size < args.count) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w.resolve !== done);
          resolve();
        }, args.timeoutMs);
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        waiters.push({ count: args.count, resolve: done });
      });
    }
    return snapshot();
  },
  async close() {
    const listening = server;
    server = undefined;
    if (!listening) return null;
    listening.closeAllConnections();
    await new Promise<void>((resolve) => listening.close(() => resolve()));
    return null;
  },
};
