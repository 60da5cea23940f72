/**
 * A Redis outage under traffic (docs/decisions/0072-redis-outages.md): a private `redis-server`, killed with SIGKILL
 * and started again on the same port, under the real app. Requests go on at once with the in-process counters,
 * signed gateway requests are refused with 503 (a replay cannot be told apart), and the counters are Redis's again
 * once it is back. Runs where this machine has Redis (TEST_REDIS_URL set, `redis-server` on PATH).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { STORE_RETRY_AFTER_S, STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';

const HMAC_KEY = 'gateway-signing-key-0123456789abcdef';
/**
 * Generous bound on five requests in a row while Redis is down or hangs, ms: each takes milliseconds when none waits,
 * and the first after Redis hangs about a second (its command's timeout drops the connection).
 */
const DOWN_BOUND_MS = 5_000;

const hasRedis =
  process.env.TEST_REDIS_URL !== undefined &&
  spawnSync('sh', ['-c', 'command -v redis-server'], { stdio: 'ignore' }).status === 0;

/** A free TCP port on the loopback. */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  server.close();
  return address.port;
}

/** The `redis-server` processes this file started: killed when it exits, whatever happened. */
const started = new Set<ChildProcess>();
process.on('exit', () => {
  for (const server of started) server.kill('SIGKILL');
});

/** Starts `redis-server` on `port` (nothing kept on disk) and waits until it answers. */
async function startRedis(port: number): Promise<ChildProcess> {
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  started.add(server);
  server.once('exit', () => started.delete(server));
  await eventually('redis-server answers', () => answers(port));
  return server;
}

/** True when a Redis answers PING on `port` of the loopback. */
async function answers(port: number): Promise<boolean> {
  const probe = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/** Kills `server` with `signal` and, for SIGKILL, waits until it is gone. */
async function signal(server: ChildProcess, name: 'SIGKILL' | 'SIGSTOP' | 'SIGCONT'): Promise<void> {
  const exited = server.exitCode !== null || server.signalCode !== null;
  if (exited) return;
  const gone = name === 'SIGKILL' ? once(server, 'exit') : undefined;
  server.kill(name);
  await gone;
}

// Defined only where it can run; scripts/test.js says when it is not run.
if (hasRedis)
  describe('a Redis outage under traffic (docs/decisions/0072-redis-outages.md)', () => {
    let port: number;
    let server: ChildProcess;
    let t: TestApp;

    before(async () => {
      port = await freePort();
      server = await startRedis(port);
      t = await createTestApp({
        env: { REDIS_URL: `redis://127.0.0.1:${port}` },
        plan: { plan: 'enterprise', perMinute: 1_000, perDay: 100_000 },
      });
      await loginSandbox(t);
      assert.equal((await t.call('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY })).status, 200);
    });
    after(async () => {
      try {
        await t?.close();
      } finally {
        if (server) await signal(server, 'SIGKILL');
      }
    });

    /**
     * A signed gateway status request (docs/decisions/0021-gateway-form.md), a second after the last one: a new
     * signature each time, as a client signs its retry again.
     */
    async function gatewayStatus() {
      t.clock.advance(1_000);
      const timestamp = String(Math.floor(t.clock() / 1000));
      const signature = createHmac('sha256', HMAC_KEY)
        .update(`${timestamp}.GET./session/status.`)
        .digest('hex');
      const response = await t.app.inject({
        method: 'GET',
        url: '/session/status',
        headers: {
          authorization: `Bearer ${t.key}`,
          'x-instance-id': t.instance.id,
          'x-timestamp': timestamp,
          'x-signature': signature,
        },
      });
      return { status: response.statusCode, headers: response.headers, body: response.json() };
    }

    /** The rate-limit counters Redis holds for the app (rate-limiter-flexible's keys under `parley:rl`). */
    async function counters(): Promise<string[]> {
      const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0 });
      client.on('error', () => undefined);
      try {
        return (await client.keys('parley:rl:*')).sort();
      } finally {
        client.disconnect();
      }
    }

    it('counts in Redis while it is up', async () => {
      const status = await t.call('GET', '/v1/session/status');
      assert.equal(status.status, 200);
      assert.match(String(status.headers.ratelimit), /^"minute";r=\d+;t=\d+, "day";r=\d+;t=\d+$/);
      assert.equal((await gatewayStatus()).status, 200);
      assert.ok((await counters()).length >= 2, 'the minute and day windows are counted in Redis');
    });

    /** Five status requests in a row all answer 200 within {@link DOWN_BOUND_MS}; a signed one answers 503. */
    async function answersWithoutRedis(state: string) {
      const began = Date.now();
      for (let i = 0; i < 5; i++) {
        const status = await t.call('GET', '/v1/session/status');
        assert.equal(status.status, 200);
        assert.match(String(status.headers.ratelimit), /^"minute";r=\d+;t=\d+, "day";r=\d+;t=\d+$/);
      }
      assert.ok(
        Date.now() - began < DOWN_BOUND_MS,
        `five requests took ${Date.now() - began} ms while Redis ${state}: none may wait for it`,
      );
      const refused = await gatewayStatus();
      assert.equal(refused.status, 503);
      assert.deepEqual(refused.body, { error: { code: 503, message: STORE_UNAVAILABLE } });
      assert.equal(refused.headers['retry-after'], String(STORE_RETRY_AFTER_S));
    }

    it('while Redis hangs (stopped, its connection open): requests go on, signed gateway requests are 503', async () => {
      await signal(server, 'SIGSTOP');
      try {
        await answersWithoutRedis('hangs');
      } finally {
        await signal(server, 'SIGCONT');
      }
      await eventually(
        'the app reconnected and signed requests pass',
        async () => (await gatewayStatus()).status === 200,
      );
    });

    it('while Redis is down: requests answer at once, counted in the process; signed gateway requests are 503', async () => {
      await signal(server, 'SIGKILL');
      await answersWithoutRedis('is down');
    });

    it('once Redis is back, the counters are in Redis again and signed requests pass', async () => {
      server = await startRedis(port);
      await eventually('the app reconnected and counts in Redis', async () => {
        const status = await t.call('GET', '/v1/session/status');
        return status.status === 200 && (await counters()).length >= 2;
      });
      assert.equal((await gatewayStatus()).status, 200);
    });

    it('a process started while Redis is down starts all the same and serves, counting in the process', async () => {
      const closed = await freePort();
      const alone = await createTestApp({ env: { REDIS_URL: `redis://127.0.0.1:${closed}` } });
      try {
        const status = await alone.call('GET', '/v1/session/status');
        assert.equal(status.status, 200);
        assert.match(String(status.headers.ratelimit), /^"minute";r=59;t=\d+, "day";r=999;t=\d+$/);
      } finally {
        await alone.close();
      }
    });
  });
