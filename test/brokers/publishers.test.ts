/**
 * The broker publishers against this machine's RabbitMQ and NATS (docs/decisions/0037-broker-endpoints.md): a
 * connection shared by several lanes is never closed under their publishes in flight (a resolver rotating its
 * addresses, the least recently used connection evicted, a stream refusing one message), one lane's attempts reach
 * the broker in the order the lane issued them whatever order their lookups end in and when its connection is
 * replaced between two of them, each copy RabbitMQ returns fails its own attempt when two lanes publish one event,
 * and a reply on the subject that is not a JetStream acknowledgement fails the attempt. The host lookup is a
 * stand-in for the outbound guard (the brokers listen on 127.0.0.1 only; 127.0.0.2 refuses at once, so either order
 * of the two dials the broker, unless a test puts its own relay to RabbitMQ there).
 */
import assert from 'node:assert/strict';
import { type AddressInfo, createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { after, describe, it } from 'node:test';
import { DiscardPolicy, jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect, headers as natsHeaders } from '@nats-io/transport-node';
import { AmqpConnection } from '../../src/brokers/amqp.ts';
import type { BrokerMessage } from '../../src/brokers/connection.ts';
import { NatsConnection } from '../../src/brokers/nats.ts';
import { BrokerPublishers } from '../../src/brokers/publishers.ts';
import { type BrokerTarget, parseBrokerUrl } from '../../src/brokers/urls.ts';
import { AMQP_URL, amqpQueue, brokersConfigured, NATS_URL, natsStream } from '../support/brokers.ts';

const TIMEOUT_MS = 5_000;

/** A name no other test uses (exchanges and subjects are shared by the whole broker). */
function unique(prefix: string): string {
  return `${prefix}${Math.random().toString(36).slice(2)}`;
}

/** Message `n` of `subject`, with id `<prefix>-<n>`. */
function message(subject: string, prefix: string, n: number): BrokerMessage {
  return {
    id: `${prefix}-${n}`,
    subject,
    type: 'Message',
    body: JSON.stringify({ n }),
    headers: { 'content-type': 'application/json' },
    timestampSeconds: Math.floor(Date.now() / 1000),
  };
}

/** Publishers whose lookups answer both loopback addresses, in an order that turns at every lookup. */
function rotatingPublishers(options: { maxConnections?: number } = {}): BrokerPublishers {
  let lookups = 0;
  return new BrokerPublishers({
    guard: {
      checkedAddresses: async () =>
        lookups++ % 2 === 0 ? ['127.0.0.1', '127.0.0.2'] : ['127.0.0.2', '127.0.0.1'],
    },
    ...options,
  });
}

/** Publishers whose lookup number `n` (from 0) answers 127.0.0.1 after `waitMs(n)` milliseconds. */
function slowLookups(waitMs: (n: number) => number): BrokerPublishers {
  let lookups = 0;
  return new BrokerPublishers({
    guard: {
      checkedAddresses: async () => {
        await new Promise((resolve) => setTimeout(resolve, waitMs(lookups++)));
        return ['127.0.0.1'];
      },
    },
  });
}

const amqpTarget = (exchange: string): BrokerTarget =>
  parseBrokerUrl(`${AMQP_URL}/?exchange=${exchange}`).target;
const natsTarget = (): BrokerTarget => parseBrokerUrl(NATS_URL).target;

/** Counts the connections the publishers open (a spy on both clients' `open`), until `restore()`. */
function countDials(): { readonly count: number; restore(): void } {
  const amqpOpen = AmqpConnection.open;
  const natsOpen = NatsConnection.open;
  let count = 0;
  AmqpConnection.open = (...args) => {
    count += 1;
    return amqpOpen.apply(AmqpConnection, args);
  };
  NatsConnection.open = (...args) => {
    count += 1;
    return natsOpen.apply(NatsConnection, args);
  };
  return {
    get count() {
      return count;
    },
    restore() {
      AmqpConnection.open = amqpOpen;
      NatsConnection.open = natsOpen;
    },
  };
}

/** A TCP relay to RabbitMQ listening on one loopback address, which can hold what clients send. */
interface Relay {
  /** The port it listens on. */
  readonly port: number;
  /** Connections it accepted. */
  readonly connections: number;
  /** From now on keeps what clients send, in order, until {@link release}. */
  hold(): void;
  /** Sends on what was held, in order, and stops holding. */
  release(): void;
  close(): void;
}

/** Starts a {@link Relay} on `host`:`port` (0: any free port) to the RabbitMQ of `AMQP_URL`. */
function relay(host: string, port: number): Promise<Relay> {
  const broker = new URL(AMQP_URL);
  const sockets = new Set<Socket>();
  const held: (() => void)[] = [];
  let holding = false;
  let connections = 0;
  const server: Server = createServer((client) => {
    connections += 1;
    const upstream = tcpConnect(Number(broker.port || 5672), broker.hostname);
    sockets.add(client);
    sockets.add(upstream);
    client.on('data', (chunk) => {
      if (holding) held.push(() => upstream.write(chunk));
      else upstream.write(chunk);
    });
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('error', end);
      socket.on('close', end);
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        get connections() {
          return connections;
        },
        hold() {
          holding = true;
        },
        release() {
          holding = false;
          for (const send of held.splice(0)) send();
        },
        close() {
          for (const socket of sockets) socket.destroy();
          server.close();
        },
      }),
    );
  });
}

/** Two relays to RabbitMQ on one port, the first on 127.0.0.1 and the second on 127.0.0.2. */
async function relayPair(): Promise<{ first: Relay; second: Relay }> {
  for (;;) {
    const first = await relay('127.0.0.1', 0);
    const second = await relay('127.0.0.2', first.port).catch(() => undefined);
    if (second !== undefined) return { first, second };
    first.close();
  }
}

/** Runs `count` publishes on each of `lanes` lanes at once, each lane one after the other. @returns the failures. */
async function lanesPublishing(
  lanes: number,
  count: number,
  publish: (lane: number, n: number) => Promise<string>,
): Promise<string[]> {
  const failures: string[] = [];
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let n = 1; n <= count; n++) {
        await publish(lane, n).catch((error: unknown) => failures.push(String(error)));
      }
    }),
  );
  return failures;
}

if (brokersConfigured())
  describe('broker publishers against RabbitMQ and NATS', () => {
    const cleanups: (() => Promise<void>)[] = [];
    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    });
    /** Publishers closed after the suite. */
    const closing = (publishers: BrokerPublishers) => {
      cleanups.push(() => publishers.close());
      return publishers;
    };

    it('RabbitMQ: lanes sharing a connection while the resolver rotates its addresses all publish, on one connection', async () => {
      const exchange = unique('parley-rotate-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      const publishers = closing(rotatingPublishers());
      const target = amqpTarget(exchange);
      const dials = countDials();
      const failures = await lanesPublishing(4, 25, (lane, n) =>
        publishers.publish(target, message(`lane.${lane}`, `l${lane}`, n), TIMEOUT_MS, `lane${lane}`),
      ).finally(() => dials.restore());
      assert.deepEqual(failures, []);
      assert.equal(dials.count, 1, 'one connection for every lookup, in either order');
      assert.equal((await queue.drain()).length, 100);
    });

    it('RabbitMQ: evicting the least recently used connection lets its publishes in flight finish', async () => {
      const exchanges = [unique('parley-evict-a-'), unique('parley-evict-b-'), unique('parley-evict-c-')];
      const queues = await Promise.all(exchanges.map((exchange) => amqpQueue(exchange, '#')));
      for (const queue of queues) cleanups.push(() => queue.remove());
      // One connection kept for three URLs: every attempt to another URL evicts the one in use.
      const publishers = closing(rotatingPublishers({ maxConnections: 1 }));
      const failures = await lanesPublishing(3, 20, (lane, n) =>
        publishers.publish(
          amqpTarget(exchanges[lane] ?? ''),
          message(`lane.${lane}`, `e${lane}`, n),
          TIMEOUT_MS,
          `lane${lane}`,
        ),
      );
      assert.deepEqual(failures, []);
      for (const queue of queues) assert.equal((await queue.drain()).length, 20);
    });

    it('RabbitMQ: a lane’s publishes issued together arrive in order though the earlier lookups end later', async () => {
      const exchange = unique('parley-order-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      // Each lookup after the first answers sooner than the one before it, so without the lane's order the last
      // would go first.
      const publishers = closing(slowLookups((n) => (n === 0 ? 0 : Math.max(0, 44 - 4 * n))));
      const target = amqpTarget(exchange);
      await publishers.publish(target, message('warm', 'warm', 0), TIMEOUT_MS, 'lane');
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          publishers.publish(target, message('window', 'w', i + 1), TIMEOUT_MS, 'lane'),
        ),
      );
      const ids = (await queue.drain()).map((queued) => queued.messageId);
      assert.deepEqual(ids, ['warm-0', ...Array.from({ length: 10 }, (_, i) => `w-${i + 1}`)]);
    });

    it('RabbitMQ: a lane’s attempt on a new connection waits for its previous one, unconfirmed on the old', async () => {
      const exchange = unique('parley-reconnect-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      // The broker's host resolves to 127.0.0.1 for two lookups, then to 127.0.0.2: the third attempt finds the
      // kept connection's addresses changed and opens another, through the second relay.
      const { first, second } = await relayPair();
      cleanups.push(async () => {
        first.close();
        second.close();
      });
      let lookups = 0;
      const publishers = closing(
        new BrokerPublishers({
          guard: { checkedAddresses: async () => [lookups++ < 2 ? '127.0.0.1' : '127.0.0.2'] },
        }),
      );
      const broker = new URL(AMQP_URL);
      const target = parseBrokerUrl(
        `amqp://${broker.username}:${broker.password}@broker.test:${first.port}/?exchange=${exchange}`,
      ).target;
      await publishers.publish(target, message('order', 'o', 0), TIMEOUT_MS, 'lane');
      // The old connection's link turns slow: what it sends waits until the third attempt is confirmed (which only
      // happens first when nothing orders it after the second), or a second at most.
      first.hold();
      const one = publishers.publish(target, message('order', 'o', 1), TIMEOUT_MS, 'lane');
      const two = publishers.publish(target, message('order', 'o', 2), TIMEOUT_MS, 'lane');
      const slowLink = setTimeout(() => first.release(), 1_000);
      void two.finally(() => first.release()).catch(() => {});
      const receipts = await Promise.all([one, two]).finally(() => clearTimeout(slowLink));
      assert.deepEqual(receipts, [
        `confirmed by RabbitMQ (exchange ${exchange})`,
        `confirmed by RabbitMQ (exchange ${exchange})`,
      ]);
      assert.deepEqual(
        [first.connections, second.connections],
        [1, 1],
        'the third attempt had a connection of its own',
      );
      const ids = (await queue.drain()).map((queued) => queued.messageId);
      assert.deepEqual(ids, ['o-0', 'o-1', 'o-2'], 'the lane’s order across the two connections');
    });

    it('RabbitMQ: an attempt its lane’s earlier attempt left no time fails before sending anything', async () => {
      const exchange = unique('parley-late-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      // The first lookup takes the whole time limit, the second none: the second waits for the first's turn.
      const publishers = closing(slowLookups((n) => (n === 0 ? 300 : 0)));
      const target = amqpTarget(exchange);
      const outcomes = await Promise.allSettled(
        [1, 2].map((n) => publishers.publish(target, message('late', 'late', n), 300, 'lane')),
      );
      assert.deepEqual(
        outcomes.map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : outcome.value)),
        [
          'BrokerError: the broker did not answer within 300 ms',
          'BrokerError: the broker did not answer within 300 ms',
        ],
      );
      assert.deepEqual(await queue.drain(), [], 'nothing was sent that the retries would send again');
    });

    it('RabbitMQ: two lanes publishing the same events where no queue is bound each fail on their own return', async () => {
      // Two endpoints of one instance with the same URL: each event goes out twice on the shared confirm channel,
      // with the same message-id and routing key, and RabbitMQ returns both copies.
      const exchange = unique('parley-returned-');
      const publishers = closing(rotatingPublishers());
      const target = amqpTarget(exchange);
      // Opens the shared connection (declaring the exchange), so the copies below go out back to back on it.
      await assert.rejects(
        publishers.publish(target, message('warm', 'warm', 0), TIMEOUT_MS),
        /the broker returned the message/,
      );
      const outcomes = await Promise.allSettled(
        [1, 2, 3, 4, 5].flatMap((n) =>
          ['endpointA', 'endpointB'].map((lane) =>
            publishers.publish(target, message('parley.inst.Message', 'evt', n), TIMEOUT_MS, `inst/${lane}`),
          ),
        ),
      );
      const returned = `BrokerError: no queue is bound to routing key parley.inst.Message on exchange ${exchange}: the broker returned the message`;
      assert.deepEqual(
        outcomes.map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : outcome.value)),
        Array.from({ length: 10 }, () => returned),
        'every copy was returned, so none may count as confirmed',
      );
    });

    it('NATS: a stream refusing messages leaves the shared connection to the other lanes', async () => {
      const prefix = unique('parleyrefuse');
      const healthy = await natsStream([`${prefix}.ok.>`]);
      cleanups.push(() => healthy.remove());
      // A stream that takes one message and refuses the rest (its limit reached, new ones discarded).
      const nc = await natsConnect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
      const manager = await jetstreamManager(nc);
      const full = unique('PARLEY_FULL_').toUpperCase();
      await manager.streams.add({
        name: full,
        subjects: [`${prefix}.full.>`],
        max_msgs: 1,
        discard: DiscardPolicy.New,
      });
      cleanups.push(async () => {
        await manager.streams.delete(full);
        await nc.close();
      });
      const publishers = closing(rotatingPublishers());
      const target = natsTarget();
      const refused: string[] = [];
      const dials = countDials();
      const failures = await lanesPublishing(4, 25, async (lane, n) => {
        if (lane > 0)
          return publishers.publish(target, message(`${prefix}.ok.${lane}`, `ok${lane}`, n), TIMEOUT_MS);
        return publishers
          .publish(target, message(`${prefix}.full.x`, 'full', n), TIMEOUT_MS)
          .catch((error) => {
            refused.push(String(error));
            return '';
          });
      }).finally(() => dials.restore());
      assert.deepEqual(failures, []);
      assert.equal(dials.count, 1, 'the refusals kept the connection');
      assert.equal(refused.length, 24, 'the full stream took one message and refused the rest');
      assert.match(refused[0] ?? '', /the broker refused the message/);
      assert.equal((await healthy.read()).length, 75);
    });

    it('NATS: an event over the server’s max_payload fails its attempt and leaves the connection open', async () => {
      const prefix = unique('parleybig');
      const stream = await natsStream([`${prefix}.>`]);
      cleanups.push(() => stream.remove());
      const nc = await natsConnect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
      const max = nc.info?.max_payload ?? 0;
      await nc.close();
      assert.ok(max > 0, 'the server announces its max_payload');
      const subject = `${prefix}.x.HistorySync`;
      /** Event `id` whose body and headers come to `bytes`, as the server counts them. */
      const sized = (id: string, bytes: number): BrokerMessage => {
        const base = message(subject, id, 0);
        const h = natsHeaders();
        for (const [name, value] of Object.entries(base.headers)) h.set(name, value);
        h.set('Nats-Msg-Id', base.id);
        return { ...base, body: 'x'.repeat(bytes - Buffer.byteLength(h.toString())) };
      };
      const publishers = closing(rotatingPublishers());
      const target = natsTarget();
      const dials = countDials();
      const refusals: string[] = [];
      try {
        assert.match(
          await publishers.publish(target, message(subject, 'small', 1), TIMEOUT_MS),
          /^stored in/,
        );
        // At the limit exactly the client sends it and the stream stores it; one byte more and parley does not send
        // it: the client would refuse it the same way (its own check), and the server could not take it.
        assert.match(await publishers.publish(target, sized('at', max), TIMEOUT_MS), /^stored in/);
        for (const bytes of [max + 1, 2 * max]) {
          await publishers.publish(target, sized(`over${bytes}`, bytes), TIMEOUT_MS).then(
            () => assert.fail(`an event of ${bytes} bytes was stored`),
            (error: unknown) => refusals.push(String(error)),
          );
        }
        assert.match(
          await publishers.publish(target, message(subject, 'small', 2), TIMEOUT_MS),
          /^stored in/,
        );
      } finally {
        dials.restore();
      }
      assert.equal(dials.count, 1, 'the refusals kept the connection');
      assert.deepEqual(
        refusals,
        [max + 1, 2 * max].map(
          (bytes) =>
            `BrokerError: event of ${bytes} bytes is larger than the NATS server's max_payload of ${max} bytes`,
        ),
      );
      const stored = await stream.read();
      assert.deepEqual(
        stored.map((msg) => msg.header?.get('Nats-Msg-Id')),
        ['small-1', 'at-0', 'small-2'],
      );
    });

    it('NATS: a reply that is not a JetStream acknowledgement fails the attempt', async () => {
      const subject = `${unique('parleyplain')}.Message`;
      const nc = await natsConnect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
      cleanups.push(() => nc.close());
      // A plain subscriber answering requests on the subject, where no stream captures it: JSON, then plain text.
      const replies = [JSON.stringify({ ok: true }), 'ok'];
      let replied = 0;
      const subscription = nc.subscribe(subject, {
        callback: (_error, msg) => {
          msg.respond(replies[replied++ % replies.length] ?? '');
        },
      });
      await nc.flush();
      const publishers = closing(rotatingPublishers());
      for (const n of [1, 2]) {
        await assert.rejects(
          publishers.publish(natsTarget(), message(subject, 'plain', n), TIMEOUT_MS),
          new RegExp(
            `no JetStream stream captures subject ${subject.replace('.', '\\.')}: the reply was not`,
          ),
        );
      }
      assert.equal(replied, 2);
      subscription.unsubscribe();
    });
  });
