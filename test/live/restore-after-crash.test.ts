/**
 * A boot restore on one node (no cluster) after the process was killed while its session was connected
 * (docs/decisions/0117-boot-restores-wait-out-a-dead-process-lock.md): the killed process never released the
 * instance's one-socket lock (`instance_locks`), which stays live until its expiry (30 s after its last renewal), and a
 * supervisor starts parley again within seconds. The restore finds the lock held, waits for it to expire and reconnects
 * by itself, the instance's operations answering `503` with `Retry-After` meanwhile. Before, the restore gave up at
 * the first try: the number stayed down until a `connect` by hand, its operations answering `409 instance is not
 * connected`, and the webhooks' last word for it was the `connected` of the killed process. SQLite, and PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { companion, control, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const ACCOUNT = '5511920000142';
const PEER = '5511988880142';
/** How long the killed process's lock is still live when parley starts again, ms. */
const LOCK_LEFT_MS = 3_000;
/** Slack for the restore's next try and a login on a loaded machine, ms. */
const SLACK_MS = 20_000;

for (const dialect of testDialects()) {
  describe(`a boot restore after the process was killed, on one node (${dialect})`, () => {
    let sim: Simulator;
    before(async () => {
      sim = await startTestSimulator();
      assert.equal((await control(sim, 'POST', '/users', { phone: ACCOUNT })).status, 201);
      assert.equal((await control(sim, 'POST', '/users', { phone: PEER })).status, 201);
    });
    after(async () => {
      await sim.close();
    });

    it('waits for the lock the killed process left to expire, then reconnects by itself', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const first = await liveApp(sim, { testStore });
        const ids = { instanceId: first.instanceId, liveKey: first.liveKey };
        await pairLive(sim, first, ACCOUNT);
        await first.t.close();
        await until('the socket closed', async () =>
          (await companion(sim, ACCOUNT)).sockets === 0 ? true : undefined,
        );
        // What a process killed while connected leaves behind: its lock, renewed a moment before it died.
        const now = Date.now();
        await testStore.store.db
          .insertInto('instance_locks')
          .values({
            instance_id: ids.instanceId,
            owner: 'killed-host:4242:0badf00d',
            acquired_at: now - 60_000,
            expires_at: now + LOCK_LEFT_MS,
          })
          .execute();

        const second = await liveApp(sim, {
          testStore,
          existing: ids,
          restoreRetry: { baseMs: 200, maxMs: 1_000 },
        });
        try {
          assert.equal(await second.t.services.sessions.restoreAll(), 0, 'the first try finds the lock held');
          const send = (body: string) => second.live('POST', '/v1/messages/send', { phone: PEER, body });
          const waiting = await send('while the lock is held');
          assert.deepEqual(
            [waiting.status, waiting.headers['retry-after'], waiting.body],
            [503, '2', { error: { code: 503, message: 'not connected to the platform right now' } }],
            'the session comes back by itself',
          );
          const back = await until(
            'the session connected by itself',
            async () => {
              const status = await second.status();
              return status.connected ? status : undefined;
            },
            LOCK_LEFT_MS + SLACK_MS,
          );
          assert.deepEqual([back.connected, back.loggedIn], [true, true]);
          const lock = await testStore.store.db
            .selectFrom('instance_locks')
            .select('owner')
            .where('instance_id', '=', ids.instanceId)
            .executeTakeFirst();
          assert.notEqual(lock?.owner, 'killed-host:4242:0badf00d', 'the lock is the new process’s');
          const sent = await send('after the restart');
          assert.equal(sent.status, 200, JSON.stringify(sent.body));
          const id = String(sent.body.data.id);
          await until('the message in the inbox', () =>
            sim.context.accounts.get(PEER)?.inbox.find((entry) => entry.id === id),
          );
        } finally {
          await second.t.close();
        }
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
