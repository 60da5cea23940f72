import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import pino from 'pino';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { recordWithRetry } from '../../src/sessions/record-retry.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { builtClient } from '../support/client.ts';
import { eventually } from '../support/eventually.ts';
import { sseReader } from '../support/sse.ts';
import { createTestStore, storeOutage, type TestDialect, testDialects } from '../support/store.ts';
import { ENTERPRISE, streamEvents } from '../support/stream-events.ts';
import { openWs } from '../support/ws.ts';

/**
 * The event stream's promise across store faults (docs/decisions/0031-event-stream.md, docs/decisions/0011-store-faults.md):
 * while events are recorded and the store fails again and again (on PostgreSQL every backend of parley's database
 * terminated, `pg_terminate_backend`; on SQLite statements failing as a busy file), a WebSocket consumer, a
 * server-sent events consumer and `@parley/client`'s `events()`, each resuming from the last event it got whenever its
 * stream ends (1013, `end` 503, a refused opening), and a poller of `GET /v1/events`, all get every event exactly once,
 * in sequence order, and the log holds each recorded event once.
 */

const { message, receipt } = streamEvents('3EB0F1');
/** Events recorded: a message and its receipt per round. */
const ROUNDS = 18;
/** A fault after every this many rounds. */
const FAULT_EVERY = 3;

/** What one consumer got: the sequences, in order, and how its streams ended. */
interface Consumer {
  name: string;
  sequences: number[];
  ends: string[];
}

for (const dialect of testDialects()) {
  describe(`event stream consumers across store faults [${dialect}]`, () => {
    let t: TestApp;
    let base: string;
    /** SQLite: statements still to fail. */
    let failing = 0;

    before(async () => {
      const testStore = await createTestStore(dialect, {
        faults: () => {
          if (failing > 0) {
            failing--;
            throw storeOutage(dialect);
          }
        },
      });
      t = await createTestApp({ dialect, plan: ENTERPRISE, testStore });
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(async () => {
      await t.close();
      await t.testStore.cleanup();
    });

    it('every consumer gets every event once, in order, resuming after each fault', async () => {
      const instance = await t.newInstance('test', 'faults');
      const auth = { authorization: `Bearer ${t.key}` };
      const consumers: Consumer[] = [];
      let stopped = false;
      const pause = () => new Promise((resolve) => setTimeout(resolve, 20));

      const webSocket = async (got: Consumer) => {
        while (!stopped) {
          const last = got.sequences.at(-1) ?? 0;
          const client = await openWs(
            `${base.replace(/^http/, 'ws')}/v1/events/stream?from=${instance.id}&after=${last}`,
            auth,
          ).catch((error: unknown) => {
            got.ends.push(`refused ${String(error).slice(0, 60)}`);
            return undefined;
          });
          if (client === undefined) {
            await pause();
            continue;
          }
          const reading = (async () => {
            for (;;) got.sequences.push(JSON.parse(await client.next()).sequence);
          })().catch(() => undefined);
          const stop = setInterval(() => stopped && client.socket.close(), 20);
          const { code } = await client.closed;
          clearInterval(stop);
          await reading;
          got.ends.push(String(code));
        }
      };
      const serverSent = async (got: Consumer) => {
        while (!stopped) {
          const last = got.sequences.at(-1);
          const response = await fetch(`${base}/v1/events/stream?from=${instance.id}`, {
            headers: {
              ...auth,
              accept: 'text/event-stream',
              ...(last === undefined ? {} : { 'last-event-id': String(last) }),
            },
          });
          if (response.status !== 200 || response.body === null) {
            got.ends.push(`refused ${response.status}`);
            await response.body?.cancel();
            await pause();
            continue;
          }
          const reader = sseReader(response.body);
          const stop = setInterval(() => stopped && void reader.cancel(), 20);
          try {
            for (;;) {
              const event = await reader.next();
              if (event.event === 'end') got.ends.push(`end ${event.data.error.code}`);
              else got.sequences.push(Number(event.id));
            }
          } catch {
            // The stream ended (after its `end`, or cut): resume from the last event.
          } finally {
            clearInterval(stop);
          }
        }
      };
      const library = async (got: Consumer) => {
        const { module } = await builtClient();
        const client = module.createParleyClient({
          baseUrl: base,
          apiKey: t.key,
          instance: instance.id,
          retries: { retries: 1000, minDelayMs: 5, maxDelayMs: 50 },
        });
        const stop = new AbortController();
        const watch = setInterval(() => stopped && stop.abort(), 20);
        try {
          for await (const event of client.events({ signal: stop.signal, limit: 5 }))
            got.sequences.push(event.sequence);
        } finally {
          clearInterval(watch);
        }
      };
      const poller = async (got: Consumer) => {
        let next = 0;
        while (!stopped) {
          const page = await t.call('GET', `/v1/events?from=${instance.id}&after=${next}&limit=4`);
          if (page.status !== 200) {
            got.ends.push(`page ${page.status}`);
            await pause();
            continue;
          }
          for (const entry of page.body.data.events) got.sequences.push(entry.sequence);
          next = page.body.data.next;
          if (page.body.data.events.length < 4) await pause();
        }
      };
      const start = (name: string, run: (got: Consumer) => Promise<void>) => {
        const got: Consumer = { name, sequences: [], ends: [] };
        consumers.push(got);
        return run(got);
      };
      const running = [
        start('WebSocket', webSocket),
        start('server-sent events', serverSent),
        start('@parley/client', library),
        start('GET /v1/events', poller),
      ];

      const faults = await faultInjector(t, dialect, (count) => {
        failing = count;
      });
      const logger = pino({ level: 'silent' });
      const record = (event: EngineEvent) =>
        recordWithRetry({ emit: (e) => t.services.recorder.record(instance.id, e), logger }, event, {
          baseDelayMs: 5,
          maxDelayMs: 50,
          unknownAttempts: 5,
          random: Math.random,
        });
      let injected = 0;
      try {
        for (let round = 1; round <= ROUNDS; round++) {
          await record(message(round));
          await record(receipt(round));
          if (round % FAULT_EVERY === 0) {
            await faults.inject();
            injected++;
          }
        }
        const expected = Array.from({ length: 2 * ROUNDS }, (_, i) => i + 1);
        await eventually(
          'every consumer reached the last event',
          () => consumers.every((got) => (got.sequences.at(-1) ?? 0) >= 2 * ROUNDS),
          60_000,
        );
        for (const got of consumers)
          assert.deepEqual(got.sequences, expected, `${got.name} (ends: ${got.ends.join(', ')})`);
        assert.equal(injected, ROUNDS / FAULT_EVERY);
        // The log holds each recorded event once: no retry after a lost answer recorded one twice.
        const log = await t.call('GET', `/v1/events?from=${instance.id}&limit=1000`);
        const bodies = new Set(
          log.body.data.events.map((entry: { type: string; event: unknown }) => JSON.stringify(entry.event)),
        );
        assert.equal(bodies.size, 2 * ROUNDS);
        assert.equal(log.body.data.next, 2 * ROUNDS);
      } finally {
        stopped = true;
        await faults.close();
        await Promise.all(running);
      }
    });
  });
}

/**
 * How the test makes the store fail: on PostgreSQL every backend of the app's database is terminated (its pool's,
 * its signals connection); on SQLite the next statements fail as a busy file (`fail(3)` through the store's fault
 * hook).
 */
async function faultInjector(
  t: TestApp,
  dialect: TestDialect,
  fail: (statements: number) => void,
): Promise<{ inject(): Promise<void>; close(): Promise<void> }> {
  if (dialect === 'sqlite')
    return {
      inject: async () => fail(3),
      close: async () => undefined,
    };
  const url = t.testStore.database.dialect === 'postgres' ? t.testStore.database.url : '';
  const name = new URL(url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  admin.on('error', () => undefined);
  await admin.connect();
  return {
    async inject() {
      const terminated = await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
        [name],
      );
      assert.ok((terminated.rowCount ?? 0) > 0, 'parley had connections to terminate');
    },
    close: () => admin.end(),
  };
}
