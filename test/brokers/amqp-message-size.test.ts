/**
 * An event over RabbitMQ's `max_message_size` against this machine's RabbitMQ (docs/decisions/0037-broker-endpoints.md
 * "Message size"): RabbitMQ does not announce the limit and closes the channel for such a message; the attempt fails
 * naming the event's size and the limit, the connection stays (a new channel on it), later events over the limit
 * go on a channel of their own, refused there while the limit stands and confirmed once it is raised, and the events
 * around them are confirmed on the one connection. The limit is lowered to 1 MiB with `rabbitmqctl eval` only while
 * a test's connection or its event's own channel opens (a channel reads it when it opens), then set back. The last
 * test restarts RabbitMQ while an event's own channel is being closed.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { AmqpConnection } from '../../src/brokers/amqp.ts';
import type { BrokerMessage } from '../../src/brokers/connection.ts';
import { BrokerPublishers } from '../../src/brokers/publishers.ts';
import { parseBrokerUrl } from '../../src/brokers/urls.ts';
import {
  AMQP_URL,
  amqpQueue,
  brokersConfigured,
  rabbitMaxMessageSize,
  restartRabbitMq,
  setRabbitMaxMessageSize,
} from '../support/brokers.ts';
import { startFlightProxy } from '../support/flight-proxy.ts';

const TIMEOUT_MS = 5_000;
/** The limit set while the test's connection opens: 1 MiB. */
const LIMIT = 1_048_576;

/** A name no other test uses (exchanges are shared by the whole broker). */
function unique(prefix: string): string {
  return `${prefix}${Math.random().toString(36).slice(2)}`;
}

/** Event `<prefix>-<n>` whose body is `bytes` bytes (RabbitMQ counts the body only against its limit). */
function sized(prefix: string, n: number, bytes: number): BrokerMessage {
  return {
    id: `${prefix}-${n}`,
    subject: 'parley.inst.HistorySync',
    type: 'HistorySync',
    body: 'x'.repeat(bytes),
    headers: { 'content-type': 'application/json' },
    timestampSeconds: Math.floor(Date.now() / 1000),
  };
}

/** The error text of an event of `bytes` over {@link LIMIT}. */
const tooLarge = (bytes: number) =>
  `BrokerError: event of ${bytes} bytes is larger than RabbitMQ's max_message_size of ${LIMIT} bytes`;

/** Runs `open` with RabbitMQ's limit at {@link LIMIT}, setting the machine's own value back after it. */
async function atLimit<T>(open: () => Promise<T>): Promise<T> {
  const before = await rabbitMaxMessageSize();
  await setRabbitMaxMessageSize(LIMIT);
  try {
    return await open();
  } finally {
    await setRabbitMaxMessageSize(before);
  }
}

if (brokersConfigured())
  describe('RabbitMQ max_message_size', () => {
    const cleanups: (() => Promise<void>)[] = [];
    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    });

    it('an event over the limit fails its attempt naming both sizes, and the connection stays for the next', async () => {
      const exchange = unique('parley-big-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      const publishers = new BrokerPublishers({ guard: { checkedAddresses: async () => ['127.0.0.1'] } });
      cleanups.push(() => publishers.close());
      const target = parseBrokerUrl(`${AMQP_URL}/?exchange=${exchange}`).target;
      const amqpOpen = AmqpConnection.open;
      let dials = 0;
      AmqpConnection.open = (...args) => {
        dials += 1;
        return amqpOpen.apply(AmqpConnection, args);
      };
      const outcomes: string[] = [];
      const attempt = (event: BrokerMessage) =>
        publishers.publish(target, event, TIMEOUT_MS).then(
          (receipt) => outcomes.push(receipt),
          (error: unknown) => outcomes.push(String(error)),
        );
      try {
        await atLimit(() => attempt(sized('small', 1, 10)));
        // At the limit exactly RabbitMQ takes it; one byte more and it closes the channel, telling its limit, which
        // fails that attempt; twice the limit is then not sent at all.
        await attempt(sized('at', 0, LIMIT));
        await attempt(sized('over', 1, LIMIT + 1));
        // Over the limit told, the event goes on a channel of its own, which reads the broker's limit as it opens:
        // still 1 MiB here, so it is refused the same way.
        await atLimit(() => attempt(sized('over', 2, 2 * LIMIT)));
        await attempt(sized('small', 2, 10));
      } finally {
        AmqpConnection.open = amqpOpen;
      }
      const confirmed = `confirmed by RabbitMQ (exchange ${exchange})`;
      assert.deepEqual(outcomes, [confirmed, confirmed, tooLarge(LIMIT + 1), tooLarge(2 * LIMIT), confirmed]);
      assert.equal(dials, 1, 'the refusal kept the connection');
      assert.deepEqual(
        (await queue.drain()).map((queued) => queued.messageId),
        ['small-1', 'at-0', 'small-2'],
      );
    });

    it('a publish in flight behind the refused event fails as unanswered, and the connection publishes on', async () => {
      const exchange = unique('parley-big-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      const target = parseBrokerUrl(`${AMQP_URL}/?exchange=${exchange}`).target;
      if (target.kind !== 'amqp') throw new Error('an amqp URL');
      const connection = await atLimit(() => AmqpConnection.open(target, '127.0.0.1', TIMEOUT_MS));
      cleanups.push(() => connection.close());
      // Both go out on the channel before RabbitMQ answers: it closes the channel at the first, dropping the second.
      const outcomes = await Promise.allSettled([
        connection.publish(sized('over', 1, LIMIT + 1), TIMEOUT_MS),
        connection.publish(sized('behind', 1, 10), TIMEOUT_MS),
      ]);
      assert.deepEqual(
        outcomes.map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : outcome.value)),
        [
          tooLarge(LIMIT + 1),
          'BrokerError: the connection to the broker ended before it answered: RabbitMQ closed the channel ' +
            `for another message of ${LIMIT + 1} bytes, over its max_message_size of ${LIMIT} bytes`,
        ],
      );
      assert.equal(connection.closed, false);
      assert.equal(
        await connection.publish(sized('behind', 2, 10), TIMEOUT_MS),
        `confirmed by RabbitMQ (exchange ${exchange})`,
      );
      assert.deepEqual(
        (await queue.drain()).map((queued) => queued.messageId),
        ['behind-2'],
      );
    });

    it('a limit raised while connected lets the event through at its next attempt, same connection', async () => {
      const exchange = unique('parley-big-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      const target = parseBrokerUrl(`${AMQP_URL}/?exchange=${exchange}`).target;
      if (target.kind !== 'amqp') throw new Error('an amqp URL');
      const connection = await atLimit(() => AmqpConnection.open(target, '127.0.0.1', TIMEOUT_MS));
      cleanups.push(() => connection.close());
      await assert.rejects(connection.publish(sized('big', 1, LIMIT + 1), TIMEOUT_MS), (error: unknown) => {
        assert.equal(String(error), tooLarge(LIMIT + 1));
        return true;
      });
      // The operator raised the limit meanwhile: the machine's own value, back in place since the connection opened.
      const raised = await rabbitMaxMessageSize();
      assert.ok(raised > LIMIT + 1, `the machine's max_message_size (${raised}) is above ${LIMIT + 1}`);
      // The retry reaches the broker, which takes it, and the event beside it on the connection's channel is not
      // disturbed.
      const outcomes = await Promise.allSettled([
        connection.publish(sized('big', 1, LIMIT + 1), TIMEOUT_MS),
        connection.publish(sized('beside', 1, 10), TIMEOUT_MS),
      ]);
      const confirmed = `confirmed by RabbitMQ (exchange ${exchange})`;
      assert.deepEqual(
        outcomes.map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : outcome.value)),
        [confirmed, confirmed],
      );
      assert.equal(connection.closed, false);
      const queued = await queue.drain();
      assert.deepEqual(queued.map((message) => message.messageId).sort(), ['beside-1', 'big-1']);
      assert.equal(queued.find((message) => message.messageId === 'big-1')?.body.length, LIMIT + 1);
    });

    it("a lane's events issued around an event on a channel of its own are queued in the order issued", async () => {
      const exchange = unique('parley-big-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      const publishers = new BrokerPublishers({ guard: { checkedAddresses: async () => ['127.0.0.1'] } });
      cleanups.push(() => publishers.close());
      const target = parseBrokerUrl(`${AMQP_URL}/?exchange=${exchange}`).target;
      const outcome = (event: BrokerMessage) =>
        publishers.publish(target, event, TIMEOUT_MS, 'lane').then(
          (receipt) => receipt,
          (error: unknown) => String(error),
        );
      const confirmed = `confirmed by RabbitMQ (exchange ${exchange})`;
      assert.equal(await atLimit(() => outcome(sized('small', 1, 10))), confirmed);
      // RabbitMQ closes the channel for it and tells its limit, which the connection keeps.
      assert.equal(await outcome(sized('big', 1, LIMIT + 1)), tooLarge(LIMIT + 1));
      // The limit is raised again (the machine's own value): the retry goes on a channel of its own and is taken. The
      // lane's events issued around it go on the connection's channel, and are queued around it in that order.
      assert.deepEqual(
        await Promise.all([
          outcome(sized('small', 2, 10)),
          outcome(sized('big', 1, LIMIT + 1)),
          outcome(sized('small', 3, 10)),
        ]),
        [confirmed, confirmed, confirmed],
      );
      assert.deepEqual(
        (await queue.drain()).map((queued) => queued.messageId),
        ['small-1', 'small-2', 'big-1', 'small-3'],
      );
    });

    // Last: it restarts RabbitMQ.
    it('an event confirmed on a channel of its own does not wait for that channel to close; a broker restart meanwhile fails the next promptly', {
      timeout: 240_000,
    }, async () => {
      const exchange = unique('parley-big-');
      const queue = await amqpQueue(exchange, '#');
      cleanups.push(() => queue.remove());
      const target = parseBrokerUrl(`${AMQP_URL}/?exchange=${exchange}`).target;
      if (target.kind !== 'amqp') throw new Error('an amqp URL');
      // Through a proxy, to hold the channel's close: RabbitMQ never gets it, so never answers it.
      const proxy = await startFlightProxy({ host: '127.0.0.1', port: 5672 });
      cleanups.push(() => proxy.close());
      const connection = await atLimit(() =>
        AmqpConnection.open({ ...target, port: proxy.port }, '127.0.0.1', TIMEOUT_MS),
      );
      cleanups.push(() => connection.close());
      await assert.rejects(connection.publish(sized('big', 1, LIMIT + 1), TIMEOUT_MS), (error: unknown) => {
        assert.equal(String(error), tooLarge(LIMIT + 1));
        return true;
      });
      // The limit is the machine's own again: the retry goes on a channel of its own and is confirmed there; the
      // close of that channel (amqplib's "Goodbye") is the connection's last frame to get through.
      proxy.freezeAt('Goodbye');
      // Limits far beyond the test's own: only an answer, or the connection's end, settles these.
      const LONG_MS = 600_000;
      const big = connection.publish(sized('big', 1, LIMIT + 1), LONG_MS).then(String, String);
      const next = connection.publish(sized('next', 1, 10), LONG_MS).then(String, String);
      const confirmed = `confirmed by RabbitMQ (exchange ${exchange})`;
      assert.equal(await big, confirmed);
      // RabbitMQ restarts: the connection ends with the next event still unanswered on it, which fails at once (the
      // outbox retries it on a new connection) instead of holding its lane for its whole time limit.
      await restartRabbitMq();
      assert.equal(
        await next,
        'BrokerError: the connection to the broker ended before it answered: channel closed',
      );
      assert.equal(connection.closed, true);
      assert.deepEqual(
        (await queue.drain()).map((queued) => queued.messageId),
        ['big-1'],
      );
    });
  });
