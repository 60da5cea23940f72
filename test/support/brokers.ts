import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jetstreamManager, type StoredMsg } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { connect as amqpConnect } from 'amqplib';
import { eventually } from './eventually.ts';
import { freePort } from './ports.ts';

/**
 * The real brokers the broker endpoint tests publish to: RabbitMQ at `TEST_AMQP_URL` (such as
 * amqp://guest:guest@127.0.0.1:5672) and NATS with JetStream at `TEST_NATS_URL` (nats://127.0.0.1:4222). The suites
 * run when both are set, as `.ci/run` does after starting the machine's brokers; the restart tests restart those
 * local brokers (`rabbitmqctl`, `nats-server`), so both variables must name this machine's. Every suite that
 * talks to a broker lives in test/brokers: the test runner bundles a folder's files into one process, where they run
 * one after the other, so a restart never lands in another broker suite's run.
 */
export const AMQP_URL = process.env.TEST_AMQP_URL ?? '';
export const NATS_URL = process.env.TEST_NATS_URL ?? '';

/** True when the broker suites run (both `TEST_AMQP_URL` and `TEST_NATS_URL` set). */
export function brokersConfigured(): boolean {
  return AMQP_URL !== '' && NATS_URL !== '';
}

const run = promisify(execFile);

/** A message read back from a RabbitMQ queue. */
export interface QueuedMessage {
  routingKey: string;
  body: string;
  messageId: string | undefined;
  type: string | undefined;
  deliveryMode: number | undefined;
  contentType: string | undefined;
  headers: Record<string, string>;
}

/** Header values as strings (RabbitMQ hands back long strings as Buffers in some clients). */
function stringHeaders(headers: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    out[name] = Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
  }
  return out;
}

/**
 * Declares a durable queue bound to the durable topic `exchange` with `bindingKey` (both created when missing).
 * @returns functions to read every message queued so far (acknowledging them) and to delete the queue.
 */
export async function amqpQueue(exchange: string, bindingKey: string) {
  const queue = `parley-test-${Math.random().toString(36).slice(2)}`;
  const connection = await amqpConnect(AMQP_URL);
  const channel = await connection.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: true });
  await channel.bindQueue(queue, exchange, bindingKey);
  await connection.close();
  return {
    name: queue,
    /** Every message in the queue now, in queue order, taken off it. */
    async drain(): Promise<QueuedMessage[]> {
      const reader = await amqpConnect(AMQP_URL);
      const ch = await reader.createChannel();
      const out: QueuedMessage[] = [];
      for (;;) {
        const message = await ch.get(queue, { noAck: true });
        if (message === false) break;
        out.push({
          routingKey: message.fields.routingKey,
          body: message.content.toString('utf8'),
          messageId: message.properties.messageId,
          type: message.properties.type,
          deliveryMode: message.properties.deliveryMode,
          contentType: message.properties.contentType,
          headers: stringHeaders(message.properties.headers),
        });
      }
      await reader.close();
      return out;
    },
    async remove(): Promise<void> {
      const c = await amqpConnect(AMQP_URL);
      const ch = await c.createChannel();
      await ch.deleteQueue(queue);
      await c.close();
    },
  };
}

/** A JetStream stream on `subjects`, file-stored (so it outlives a server restart). */
export async function natsStream(subjects: string[]) {
  const name = `PARLEY_TEST_${Math.random().toString(36).slice(2).toUpperCase()}`;
  const nc = await natsConnect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name, subjects });
  await nc.close();
  return {
    name,
    /** Every message stored in the stream, in stream order. */
    async read(): Promise<StoredMsg[]> {
      const reader = await natsConnect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
      const manager = await jetstreamManager(reader);
      const info = await manager.streams.info(name);
      const out: StoredMsg[] = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
        const message = await manager.streams.getMessage(name, { seq });
        if (message !== null) out.push(message);
      }
      await reader.close();
      return out;
    },
    async remove(): Promise<void> {
      const c = await natsConnect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
      await (await jetstreamManager(c)).streams.delete(name);
      await c.close();
    },
  };
}

/** Resolves once something accepts TCP connections on 127.0.0.1:`port`, polling every 100 ms for `timeoutMs`. */
export async function waitForPort(port: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
}

/**
 * Restarts the machine's RabbitMQ node: `rabbitmqctl shutdown` (the whole node stops: every connection drops and
 * the AMQP port closes), then `rabbitmq-server -detached` and `rabbitmqctl await_startup`. Durable queues and their
 * persistent messages come back from disk.
 */
export async function restartRabbitMq(): Promise<void> {
  await run('rabbitmqctl', ['shutdown']);
  await run('rabbitmq-server', ['-detached']);
  // `await_startup` fails at once while the new node's VM is not up yet: ask again until it answers.
  const deadline = Date.now() + 90_000;
  for (;;) {
    const started = await run('rabbitmqctl', ['await_startup', '--timeout', '10']).then(
      () => true,
      () => false,
    );
    if (started) break;
    if (Date.now() > deadline) throw new Error('RabbitMQ did not start again within 90 s');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await waitForPort(5672);
}

/**
 * Kills the machine's NATS server with SIGKILL and starts it again with the machine's own command (JetStream on,
 * store in /var/lib/nats-server, so file-stored streams come back).
 */
export async function restartNats(): Promise<void> {
  await run('pkill', ['-KILL', '-x', 'nats-server']);
  // SIGKILL is delivered asynchronously: start the new server only once the old one is gone.
  for (;;) {
    const alive = await run('pgrep', ['-x', 'nats-server']).then(
      () => true,
      () => false,
    );
    if (!alive) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await run('start-stop-daemon', [
    '--start',
    '--oknodo',
    '--background',
    '--exec',
    '/usr/sbin/nats-server',
    '--',
    '-a',
    '127.0.0.1',
    '-p',
    '4222',
    '-js',
    '-sd',
    '/var/lib/nats-server',
    '-l',
    '/var/log/nats-server.log',
  ]);
  await waitForPort(4222);
}

/** The machine's RabbitMQ `max_message_size`, bytes (`rabbitmqctl eval`; 134217728 when unset, its 3.8+ default). */
export async function rabbitMaxMessageSize(): Promise<number> {
  const { stdout } = await run('rabbitmqctl', ['eval', 'application:get_env(rabbit, max_message_size).']);
  const match = /\{ok,(\d+)\}/.exec(stdout);
  return match === null ? 134_217_728 : Number(match[1]);
}

/**
 * Sets the machine's RabbitMQ `max_message_size` to `bytes` (`rabbitmqctl eval`, in the running node only). A channel
 * reads it when it opens, so the channels opened while it is set keep it after {@link rabbitMaxMessageSize}'s value
 * is set back: tests set it, open their connection, and set it back at once, so no other suite's channel gets it.
 */
export async function setRabbitMaxMessageSize(bytes: number): Promise<void> {
  if (!Number.isSafeInteger(bytes) || bytes < 1) throw new Error(`not a message size: ${bytes}`);
  await run('rabbitmqctl', ['eval', `application:set_env(rabbit, max_message_size, ${bytes}).`]);
}

/** A NATS server of a test's own (see {@link startPrivateNats}). */
export interface PrivateNats {
  /** `nats://127.0.0.1:<port>`. */
  url: string;
  /**
   * Writes `bytes` as `max_payload` into the server's configuration file, has it reload (SIGHUP, as
   * `nats-server --signal reload` sends) and resolves once a new connection is told the new limit.
   */
  setMaxPayload(bytes: number): Promise<void>;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and removes its folder. */
  stop(): Promise<void>;
}

/**
 * Starts a NATS server of the test's own (/usr/sbin/nats-server) with JetStream on 127.0.0.1 at a free port, its
 * configuration file and JetStream store in a temporary folder, `max_payload` set to `maxPayload` bytes: a test may
 * reload its configuration without touching the machine's shared server (`TEST_NATS_URL`), which other suites use.
 */
export async function startPrivateNats(maxPayload: number): Promise<PrivateNats> {
  const folder = await mkdtemp(join(tmpdir(), 'parley-nats-'));
  const port = await freePort();
  const configFile = join(folder, 'nats.conf');
  const writeConfig = (bytes: number) =>
    writeFile(
      configFile,
      `host: 127.0.0.1\nport: ${port}\nmax_payload: ${bytes}\njetstream { store_dir: "${join(folder, 'js')}" }\n`,
    );
  await writeConfig(maxPayload);
  const server = spawn('/usr/sbin/nats-server', ['-c', configFile, '-l', join(folder, 'nats.log')], {
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  await waitForPort(port, 10_000);
  const url = `nats://127.0.0.1:${port}`;
  return {
    url,
    async setMaxPayload(bytes: number): Promise<void> {
      await writeConfig(bytes);
      server.kill('SIGHUP');
      await eventually(`the NATS server to announce max_payload ${bytes}`, async () => {
        const nc = await natsConnect({ servers: `127.0.0.1:${port}` });
        const announced = nc.info?.max_payload;
        await nc.close();
        return announced === bytes;
      });
    },
    async stop(): Promise<void> {
      if (server.exitCode === null && server.signalCode === null) {
        server.kill('SIGTERM');
        const killer = setTimeout(() => server.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(killer);
      }
      await rm(folder, { recursive: true, force: true });
    },
  };
}
