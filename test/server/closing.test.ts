import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { startServer } from '../../src/server.ts';
import { startReceiver, TEST_CA } from '../support/https-receiver.ts';

/** What the stop logs when it had to cut connections still open at its deadline (src/server.ts). */
const DEADLINE_WARNING = 'requests still running at the shutdown deadline';

/**
 * A server on a fresh SQLite store whose stop has a 5 s budget (requests get 2 s of it before their connections are
 * cut), with its log lines at `warn` and above kept, and the test key of its first boot.
 */
async function startClosable() {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-closing-'));
  const caFile = join(dataDir, 'ca.pem');
  writeFileSync(caFile, TEST_CA);
  const config = loadConfig({
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    SHUTDOWN_TIMEOUT_SECONDS: '5',
    OUTBOUND_CA_FILE: caFile,
    WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
  });
  const lines: string[] = [];
  let banner = '';
  const server = await startServer(config, {
    logger: pino({ level: 'warn' }, { write: (line: string) => lines.push(line) }),
    print: (text) => {
      banner = text;
    },
  });
  const key = /svc_test_[0-9A-Za-z]{38}/.exec(banner)?.[0] ?? '';
  return { server, key, port: Number(new URL(server.url).port), lines, dataDir };
}

/** A raw connection to `port` (HTTP written by hand), with what it received and a promise of its close. */
async function rawConnection(port: number) {
  const socket: Socket = connect(port, '127.0.0.1');
  // A reset shows as the close below, with what was received until then.
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const state = { received: '' };
  socket.on('data', (chunk: Buffer) => {
    state.received += chunk.toString();
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, state, closed };
}

/** Connects the first boot's sandbox instance and links it, so it can send. */
async function linkSandbox(url: string, key: string): Promise<void> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  await fetch(`${url}/v1/session/connect`, { method: 'POST', headers, body: '{}' });
  await fetch(`${url}/v1/sandbox/scan`, { method: 'POST', headers, body: '{"phone":"5511999990001"}' });
}

/** Writes on `socket`, by hand, a send of an image fetched from `imageUrl` (a receiver that answers slowly). */
function writeImageSend(socket: Socket, key: string, imageUrl: string): void {
  const body = JSON.stringify({ phone: '5511999990002', image: imageUrl });
  socket.write(
    `POST /v1/messages/send/image HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** The status codes of the HTTP answers in `received`, in order. */
function statusesOf(received: string): (string | undefined)[] {
  return [...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
}

/** The stop's deadline warnings among the server's log `lines` (none when no connection had to be cut). */
function deadlineWarnings(lines: readonly string[]): string[] {
  return lines.filter((line) => line.includes(DEADLINE_WARNING));
}

/** Resolves once the server at `port` refuses new connections: its app is closing. */
async function listenerClosed(port: number): Promise<void> {
  while (
    await new Promise<boolean>((resolve) => {
      const probe = connect(port, '127.0.0.1');
      probe.once('connect', () => {
        probe.destroy();
        resolve(true);
      });
      probe.once('error', () => resolve(false));
    })
  ) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Runs `body` against a server whose first boot's instance is linked and which has, on `client`, a send in flight:
 * its image is held by the receiver until `body` calls `release`, so the send's answer is still to come when the stop
 * begins. Cleans up.
 */
async function withSendInFlight(
  body: (context: {
    server: Awaited<ReturnType<typeof startServer>>;
    port: number;
    lines: string[];
    client: Awaited<ReturnType<typeof rawConnection>>;
    release: () => void;
  }) => Promise<void>,
): Promise<void> {
  let release = (): void => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const image = readFileSync('test/fixtures/media/tiny.png');
  const media = await startReceiver({ respond: () => released.then(() => ({ status: 200, body: image })) });
  const { server, key, port, lines, dataDir } = await startClosable();
  try {
    await linkSandbox(server.url, key);
    const client = await rawConnection(port);
    writeImageSend(client.socket, key, media.url);
    await media.waitForCount(1, 5000);
    await body({ server, port, lines, client, release });
  } finally {
    release();
    await server.stop();
    await media.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('a stopping server lets go of its connections (docs/decisions/0064-closing-connections.md)', () => {
  it('a connection that never sent a request is ended when the stop begins, not cut at the deadline', async () => {
    const { server, port, lines, dataDir } = await startClosable();
    try {
      // Connected, nothing sent: a browser's speculative connection. Node's close would keep it for 60 s.
      const idle = await rawConnection(port);
      await server.stop();
      await idle.closed;
      assert.equal(idle.state.received, '', 'no answer: it asked nothing');
      assert.deepEqual(deadlineWarnings(lines), [], 'the stop did not need its deadline');
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a kept-alive connection whose request asked for another protocol, served as HTTP, is ended', async () => {
    const { server, port, lines, dataDir } = await startClosable();
    try {
      // `Upgrade: h2c` is not a WebSocket upgrade: the request is answered as plain HTTP, the connection kept alive.
      const client = await rawConnection(port);
      const answered = new Promise<void>((resolve) => {
        client.socket.on('data', () => {
          if (client.state.received.includes('"status":"ok"')) resolve();
        });
      });
      client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n');
      await answered;
      await server.stop();
      await client.closed;
      assert.deepEqual(statusesOf(client.state.received), ['200'], client.state.received);
      assert.deepEqual(deadlineWarnings(lines), [], 'the stop did not need its deadline');
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a keep-alive connection whose answer went out after the stop began is ended once answered', async () => {
    await withSendInFlight(async ({ server, port, lines, client, release }) => {
      const stopped = server.stop();
      await listenerClosed(port);
      // The send is answered while the app closes; its connection, kept alive, is ended after the answer.
      release();
      await stopped;
      await client.closed;
      assert.deepEqual(statusesOf(client.state.received), ['200'], client.state.received);
      assert.deepEqual(deadlineWarnings(lines), [], 'the stop did not need its deadline');
    });
  });

  it('a request that reaches the app while it closes gets the 503 envelope', async () => {
    await withSendInFlight(async ({ server, port, lines, client, release }) => {
      const stopped = server.stop();
      await listenerClosed(port);
      // On the same connection, behind the send still waiting for its image: a health check.
      client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      release();
      await stopped;
      await client.closed;
      const { received } = client.state;
      assert.deepEqual(statusesOf(received), ['200', '503'], received);
      assert.ok(received.includes('{"error":{"code":503,"message":"server is shutting down"}}'), received);
      assert.deepEqual(
        deadlineWarnings(lines),
        [],
        'both answered, the connection ended without the deadline',
      );
    });
  });
});
