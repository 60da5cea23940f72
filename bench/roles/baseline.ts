import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import pino from 'pino';
import { Pool } from 'undici';
import { webhookHeaders } from '../../src/webhooks/signing.ts';
import type { Handlers } from '../lib/ipc.ts';
import { profilingHandlers } from '../lib/profiling-handlers.ts';
import { cpuMicros, sleep } from '../lib/stats.ts';

/**
 * The baselines, in a process of their own started like parley's (same runtime, same flags):
 * - `serve`: a bare Fastify app (same Fastify, same logger level, JSON body parsing) whose
 *   `POST /v1/messages/send` answers a send result envelope at once — the ceiling for the HTTP layer alone;
 * - `post`: the webhook POSTs sent directly with an undici pool (keep-alive, `concurrency` connections) to the
 *   same receiver, with the same body shape and the same two signatures as parley's deliveries.
 */

let app: { close(): Promise<unknown> } | undefined;

async function serve(args: { logLevel?: string }): Promise<{ url: string }> {
  const logger = pino({ level: args.logLevel ?? 'warn' }, pino.destination(2));
  const bare = Fastify({ loggerInstance: logger });
  bare.post('/v1/messages/send', async () => ({
    success: true,
    code: 200,
    data: {
      details: 'Sent',
      id: `3EB0${randomBytes(9).toString('hex').toUpperCase()}`,
      timestamp: new Date().toISOString(),
    },
  }));
  const url = await bare.listen({ port: 0, host: '127.0.0.1' });
  app = bare;
  return { url };
}

/**
 * A webhook body shaped like parley's `Message` event (docs/decisions/0018-webhook-events-and-payloads.md), stamped
 * with `at` (epoch ms).
 */
function eventBody(instanceId: string, sequence: number, at: number): string {
  const jid = '5511988887777@s.whatsapp.net';
  return JSON.stringify({
    type: 'Message',
    event: {
      info: {
        id: randomBytes(16).toString('hex').toUpperCase(),
        messageSource: { chat: jid, sender: jid, isFromMe: false, isGroup: false },
        pushName: 'Bench',
        timestamp: new Date(at).toISOString(),
      },
      message: { conversation: `bench event ${sequence}` },
    },
    instanceId,
    sequence,
  });
}

/**
 * Sends `count` signed POSTs to `url` over `concurrency` keep-alive connections. `ratePerSecond` 0 = every event
 * exists at the start (a backlog, as parley's burst); otherwise each is made and sent on that schedule. Events
 * are spread over `instances` made-up instance ids, each with its own sequence.
 * @returns epoch ms of the start and of the last answer, and how many answers were not 2xx.
 */
async function post(args: {
  url: string;
  count: number;
  concurrency: number;
  instances: number;
  ratePerSecond: number;
  hmacKey: string;
}): Promise<{ startedAt: number; finishedAt: number; failed: number }> {
  const target = new URL(args.url);
  const pool = new Pool(target.origin, {
    connections: args.concurrency,
    connect: { ca: readFileSync(new URL('../../test/fixtures/tls/cert.pem', import.meta.url), 'utf8') },
  });
  const instanceIds = Array.from({ length: args.instances }, () => randomUUID());
  const sequences = new Map<string, number>();
  let failed = 0;
  const send = async (k: number, at: number) => {
    const instanceId = instanceIds[k % instanceIds.length] ?? '';
    const sequence = (sequences.get(instanceId) ?? 0) + 1;
    sequences.set(instanceId, sequence);
    const body = eventBody(instanceId, sequence, at);
    const headers = webhookHeaders({
      id: randomUUID(),
      timestampSeconds: Math.floor(Date.now() / 1000),
      body,
      hmacKey: args.hmacKey,
    });
    const response = await pool.request({ path: target.pathname, method: 'POST', headers, body });
    await response.body.text();
    if (response.statusCode < 200 || response.statusCode >= 300) failed += 1;
  };
  const startedAt = Date.now();
  try {
    if (args.ratePerSecond <= 0) {
      let next = 0;
      await Promise.all(
        Array.from({ length: args.concurrency }, async () => {
          while (next < args.count) await send(next++, startedAt);
        }),
      );
    } else {
      const pending: Promise<void>[] = [];
      let k = 0;
      while (k < args.count) {
        const due = Math.min(
          args.count,
          Math.floor(((Date.now() - startedAt) * args.ratePerSecond) / 1000) + 1,
        );
        while (k < due) pending.push(send(k++, Date.now()));
        await sleep(2);
      }
      await Promise.all(pending);
    }
  } finally {
    await pool.close();
  }
  return { startedAt, finishedAt: Date.now(), failed };
}

/** Commands of the baseline role. */
export const baselineHandlers: Handlers = {
  serve,
  post,
  cpu: cpuMicros,
  ...profilingHandlers(),
  async close() {
    await app?.close();
    app = undefined;
    return null;
  },
};
