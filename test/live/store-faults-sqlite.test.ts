/**
 * A SQLite store that fails (SQLITE_BUSY and SQLITE_IOERR on every query) for {@link FAULT_MS} under live inbound
 * traffic (docs/decisions/0011-store-faults.md): the fault is injected through the store's test-only fault hook
 * (openStore's `faults` option, never configuration). parley runs in this process with the real Baileys engine
 * against the simulator; nothing escapes as an unhandled error, requests answer 503 with Retry-After, /readyz is 503
 * during and 200 after, and every message the simulated user wrote is stored once and delivered after recovery.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import type { Simulator } from '../../sim/simulator.ts';
import type { DatabaseConfig } from '../../src/config/config.ts';
import { STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import { type Receiver, startReceiver, webhookIdsByMessage } from '../support/https-receiver.ts';
import type { TestStore } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

/** How long every query fails, ms. */
const FAULT_MS = 8_000;
const PEER = '5511988880006';
const ACCOUNT = '5511920000098';

describe('a failing SQLite store under live inbound traffic (sqlite, injected fault)', () => {
  let sim: Simulator | undefined;
  let app: LiveApp | undefined;
  let receiver: Receiver | undefined;
  let testStore: TestStore | undefined;
  const escaped: unknown[] = [];
  const onEscape = (error: unknown) => {
    escaped.push(error);
  };
  process.on('unhandledRejection', onEscape);
  process.on('uncaughtException', onEscape);
  after(async () => {
    process.off('unhandledRejection', onEscape);
    process.off('uncaughtException', onEscape);
    await app?.t.close();
    await receiver?.close();
    await sim?.close();
    await testStore?.cleanup();
  });

  it('nothing escapes, requests answer 503 with Retry-After, and every message is stored and delivered after', async (t) => {
    // The fault: while set, every query throws it as better-sqlite3 would.
    let fault: Error | undefined;
    let faulted = 0;
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-sqlite-fault-'));
    const database: DatabaseConfig = { dialect: 'sqlite', path: join(dataDir, 'parley.db') };
    const store = await openStore(database, {
      faults: () => {
        if (!fault) return;
        faulted += 1;
        throw fault;
      },
    });
    await migrateToLatest(store);
    testStore = {
      store,
      database,
      schema: undefined,
      dataDir,
      cleanup: async () => {
        await store.destroy();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
    sim = await startTestSimulator();
    receiver = await startReceiver();
    app = await liveApp(sim, { testStore });
    const live = app;
    const currentSim = sim;
    assert.equal((await control(sim, 'POST', '/users', { phone: PEER, pushName: 'Peer' })).status, 201);
    assert.equal((await control(sim, 'POST', '/users', { phone: ACCOUNT, pushName: 'Shop' })).status, 201);
    assert.equal((await live.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    await pairLive(sim, live, ACCOUNT);

    const written: { id: string; at: number }[] = [];
    let streaming = true;
    const stream = (async () => {
      for (let i = 1; streaming; i++) {
        const response = await control(currentSim, 'POST', '/messages', {
          from: PEER,
          to: ACCOUNT,
          text: `f ${i}`,
        });
        assert.equal(response.status, 201, JSON.stringify(response.body));
        written.push({ id: String(response.body.id), at: Date.now() });
        await sleep(200);
      }
    })();
    const storedIds = async () =>
      new Set(
        (
          await store.db
            .selectFrom('messages')
            .select('id')
            .where('instance_id', '=', live.instanceId)
            .execute()
        ).map((row) => row.id),
      );
    await until('the first messages stored', async () => ((await storedIds()).size >= 3 ? true : undefined));

    const busy = new SQLite.SqliteError('database is locked', 'SQLITE_BUSY');
    const ioerr = new SQLite.SqliteError('disk I/O error', 'SQLITE_IOERR_WRITE');
    fault = busy;
    const downAt = Date.now();
    let answered503 = 0;
    while (Date.now() - downAt < FAULT_MS) {
      // Half the fault answers BUSY, the other half IOERR.
      fault = Date.now() - downAt < FAULT_MS / 2 ? busy : ioerr;
      const answer = await live.live('GET', '/v1/messages/none');
      assert.equal(answer.status, 503, JSON.stringify(answer.body));
      assert.deepEqual(answer.body, { error: { code: 503, message: STORE_UNAVAILABLE } });
      assert.equal(answer.headers['retry-after'], '5');
      const ready = await live.t.call('GET', '/readyz');
      assert.equal(ready.status, 503);
      answered503 += 1;
      await sleep(500);
    }
    fault = undefined;
    t.diagnostic(`queries failed by the fault: ${faulted}; 503 answers checked: ${answered503}`);
    const duringFault = written.filter((w) => w.at >= downAt).length;
    assert.ok(duringFault > 0, 'messages were written during the fault');

    await until('/readyz 200 again', async () =>
      (await live.t.call('GET', '/readyz')).status === 200 ? true : undefined,
    );
    const countAtRecovery = written.length;
    await until('messages after the recovery', () =>
      written.length >= countAtRecovery + 3 ? true : undefined,
    );
    streaming = false;
    await stream;

    const ids = written.map((w) => w.id);
    await until('every written message stored', async () => {
      const stored = await storedIds();
      return ids.every((id) => stored.has(id)) ? true : undefined;
    });
    const delivered = () => webhookIdsByMessage(receiver?.requests ?? []);
    await until('every written message delivered', () =>
      ids.every((id) => delivered().has(id)) ? true : undefined,
    );
    for (const id of ids) assert.equal(delivered().get(id)?.size, 1, `${id}: one webhook-id`);
    t.diagnostic(
      `messages written: ${ids.length} (${duringFault} during the fault), all stored and delivered`,
    );
    assert.deepEqual(escaped, [], 'no unhandled rejection or exception');
  });
});
