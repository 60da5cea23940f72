/**
 * An event over NATS's `max_payload` when the operator raises the limit while parley is connected
 * (docs/decisions/0037-broker-endpoints.md "Message size"), against a NATS server of the test's own (its
 * configuration reloaded with SIGHUP; the machine's shared server is never reconfigured). The server applies a
 * reloaded `max_payload` to its connected clients without announcing it, so the kept connection still holds the old
 * figure: the event's next attempt is tried on a connection of its own, stored once the limit was raised, failing
 * with the server's limit of now while it is still too large; the kept connection publishes on beside it, in order.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager, type StoredMsg } from '@nats-io/jetstream';
import { connect as natsConnect, headers as natsHeaders } from '@nats-io/transport-node';
import type { BrokerMessage } from '../../src/brokers/connection.ts';
import { NatsConnection } from '../../src/brokers/nats.ts';
import { BrokerPublishers } from '../../src/brokers/publishers.ts';
import { parseBrokerUrl } from '../../src/brokers/urls.ts';
import { brokersConfigured, type PrivateNats, startPrivateNats } from '../support/brokers.ts';

const TIMEOUT_MS = 5_000;
/** The server's `max_payload` when the test's connection opens, bytes. */
const FIRST_LIMIT = 16_384;
/** The limit the configuration is reloaded with, bytes. */
const RAISED_LIMIT = 65_536;
const SUBJECT = 'parley.inst.HistorySync';

/** Event `id` whose body and headers come to `bytes` bytes, as the server counts them against `max_payload`. */
function sized(id: string, bytes: number): BrokerMessage {
  const base: BrokerMessage = {
    id,
    subject: SUBJECT,
    type: 'HistorySync',
    body: '',
    headers: { 'content-type': 'application/json' },
    timestampSeconds: Math.floor(Date.now() / 1000),
  };
  const h = natsHeaders();
  for (const [name, value] of Object.entries(base.headers)) h.set(name, value);
  h.set('Nats-Msg-Id', base.id);
  return { ...base, body: 'x'.repeat(bytes - Buffer.byteLength(h.toString())) };
}

/** The error text of an event of `bytes` over a server limit of `max`. */
const tooLarge = (bytes: number, max: number) =>
  `BrokerError: event of ${bytes} bytes is larger than the NATS server's max_payload of ${max} bytes`;

if (brokersConfigured())
  describe('NATS max_payload raised while connected', () => {
    let nats: PrivateNats;
    before(async () => {
      nats = await startPrivateNats(FIRST_LIMIT);
      const nc = await natsConnect({ servers: nats.url.replace(/^nats:\/\//, '') });
      await (await jetstreamManager(nc)).streams.add({ name: 'PARLEY', subjects: ['parley.>'] });
      await nc.close();
    });
    after(async () => {
      await nats?.stop();
    });

    /** Every message the stream holds, in stream order. */
    async function stored(): Promise<StoredMsg[]> {
      const nc = await natsConnect({ servers: nats.url.replace(/^nats:\/\//, '') });
      const manager = await jetstreamManager(nc);
      const info = await manager.streams.info('PARLEY');
      const out: StoredMsg[] = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
        const message = await manager.streams.getMessage('PARLEY', { seq });
        if (message !== null) out.push(message);
      }
      await nc.close();
      return out;
    }

    it('the event is stored at its next attempt once the limit is raised, without a new kept connection', async () => {
      const publishers = new BrokerPublishers({ guard: { checkedAddresses: async () => ['127.0.0.1'] } });
      const target = parseBrokerUrl(nats.url).target;
      const natsOpen = NatsConnection.open;
      let dials = 0;
      NatsConnection.open = (...args) => {
        dials += 1;
        return natsOpen.apply(NatsConnection, args);
      };
      const outcome = (event: BrokerMessage) =>
        publishers.publish(target, event, TIMEOUT_MS, 'lane').then(
          (receipt) => receipt,
          (error: unknown) => String(error),
        );
      const big = sized('big', 2 * FIRST_LIMIT);
      try {
        assert.match(await outcome(sized('small-1', 100)), /^stored in JetStream stream PARLEY/);
        // While the limit stands, the event fails naming both sizes, and is not sent.
        assert.equal(await outcome(big), tooLarge(2 * FIRST_LIMIT, FIRST_LIMIT));

        await nats.setMaxPayload(RAISED_LIMIT);
        // The kept connection was told 16 KiB and is told nothing more: the retry reads the server's limit of now.
        // A lane's events issued around it are stored in the order issued.
        const [before, retried, after] = await Promise.all([
          outcome(sized('small-2', 100)),
          outcome(big),
          outcome(sized('small-3', 100)),
        ]);
        assert.match(before, /^stored in JetStream stream PARLEY as message 2$/);
        assert.match(retried, /^stored in JetStream stream PARLEY as message 3$/);
        assert.match(after, /^stored in JetStream stream PARLEY as message 4$/);
        // Still too large for the raised limit: it fails naming the limit of now.
        assert.equal(
          await outcome(sized('huge', 2 * RAISED_LIMIT)),
          tooLarge(2 * RAISED_LIMIT, RAISED_LIMIT),
        );
        assert.match(
          await outcome(sized('small-4', 100)),
          /^stored in JetStream stream PARLEY as message 5$/,
        );
      } finally {
        NatsConnection.open = natsOpen;
        await publishers.close();
      }
      assert.equal(dials, 1, 'the kept connection served every attempt around the oversize ones');
      const messages = await stored();
      assert.deepEqual(
        messages.map((m) => m.header?.get('Nats-Msg-Id')),
        ['small-1', 'small-2', 'big', 'small-3', 'small-4'],
      );
      assert.equal(messages[2]?.data.length, Buffer.byteLength(big.body));
    });
  });
