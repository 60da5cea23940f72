/**
 * A boot restore on one node (no cluster) whose store fails while the session reconnects
 * (docs/decisions/0016-session-lifecycle.md, docs/decisions/0011-store-faults.md): the real Baileys engine takes the
 * instance's one-socket lock (`instance_locks`) before it opens its socket, and here the store answers every statement
 * on that table with an outage (SQLITE_BUSY, or PostgreSQL's "terminating connection" 57P01) when parley starts
 * again. The restore is retried with backoff until the store answers: meanwhile the instance's operations answer
 * `503 not connected to the platform right now` with `Retry-After`, as on several nodes while the lease keeper retries
 * a restore, and once the store is back the session reconnects by itself and sends go out. Before, the failed restore
 * stayed failed and the operations answered `409 instance is not connected` until a `connect` by hand. SQLite, and
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { createTestStore, storeOutage, testDialects } from '../support/store.ts';
import {
  companion,
  control,
  liveApp,
  pairLive,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

const ACCOUNT = '5511920000141';
const PEER = '5511988880141';

for (const dialect of testDialects()) {
  describe(`a boot restore whose store fails, on one node (${dialect})`, () => {
    let sim: Simulator;
    before(async () => {
      sim = await startTestSimulator();
      assert.equal((await control(sim, 'POST', '/users', { phone: ACCOUNT })).status, 201);
      assert.equal((await control(sim, 'POST', '/users', { phone: PEER })).status, 201);
    });
    after(async () => {
      await sim.close();
    });

    it('answers 503 with Retry-After while the store fails, then reconnects by itself', async () => {
      let down = false;
      /** Statements on the one-socket lock table the store refused. */
      let refused = 0;
      const testStore = await createTestStore(dialect, {
        faults: (text) => {
          if (!down || !/instance_locks/.test(text)) return;
          refused += 1;
          throw storeOutage(dialect);
        },
      });
      try {
        const first = await liveApp(sim, { testStore });
        const ids = { instanceId: first.instanceId, liveKey: first.liveKey };
        await pairLive(sim, first, ACCOUNT);
        await first.t.close();
        await until('the socket closed', async () =>
          (await companion(sim, ACCOUNT)).sockets === 0 ? true : undefined,
        );

        const second = await liveApp(sim, {
          testStore,
          existing: ids,
          restoreRetry: { baseMs: 20, maxMs: 100 },
        });
        try {
          down = true;
          assert.equal(await second.t.services.sessions.restoreAll(), 0, 'the first try fails on the store');
          const send = (body: string) => second.live('POST', '/v1/messages/send', { phone: PEER, body });
          const waiting = await send('while the store fails');
          assert.deepEqual(
            [waiting.status, waiting.headers['retry-after'], waiting.body],
            [503, '2', { error: { code: 503, message: 'not connected to the platform right now' } }],
            'a restore retried until the store answers comes back by itself',
          );
          // Tried again while the store still fails: the restore does not give up.
          const before = refused;
          await until('another restore try', () => (refused > before + 1 ? true : undefined));
          assert.equal(second.t.services.sessions.pendingRestores, 1);
          assert.equal((await send('still failing')).status, 503);
          down = false;
          await waitForStatus(second, true, true);
          assert.equal(second.t.services.sessions.pendingRestores, 0);
          const sent = await send('once the store is back');
          assert.equal(sent.status, 200, JSON.stringify(sent.body));
          const id = String(sent.body.data.id);
          await until('the message in the inbox', () =>
            sim.context.accounts.get(PEER)?.inbox.find((entry) => entry.id === id),
          );
        } finally {
          down = false;
          await second.t.close();
        }
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
