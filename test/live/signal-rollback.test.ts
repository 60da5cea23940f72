/**
 * A process killed after relaying a message and before its key store held the new Signal state (Baileys sends inside
 * its key transaction and stores the keys after) leaves the process that restores the session one step behind
 * (docs/decisions/0008-leases-and-fencing.md). Made here on purpose: the instance's stored Signal sessions are put
 * back to what they were before its last message while parley is stopped, then parley starts again on the same store
 * and sends. Its next message reuses message keys the recipient's phone already used; the phone asks for it again
 * (a retry receipt, sim/messaging/retry-request.ts) and parley's session sends it again in a fresh session, so it
 * lands, once. Real Baileys against the simulator, on SQLite and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RetryRequestEvent } from '../../sim/messaging/retry-request.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import {
  companion,
  control,
  liveApp,
  pairLive,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

const ACCOUNT = '5511920000131';
const PEER = '5511988880131';

for (const dialect of testDialects()) {
  describe(`a session restored one message behind its Signal state (${dialect})`, () => {
    let sim: Simulator;
    const requests: RetryRequestEvent[] = [];
    before(async () => {
      sim = await startTestSimulator();
      sim.context.events.on('retry-request', (event: RetryRequestEvent) => requests.push(event));
      assert.equal((await control(sim, 'POST', '/users', { phone: ACCOUNT })).status, 201);
      assert.equal((await control(sim, 'POST', '/users', { phone: PEER })).status, 201);
    });
    after(async () => {
      await sim.close();
    });

    it('the recipient asks for the next message again and gets it once; the message after needs no retry', async () => {
      const testStore = await createTestStore(dialect);
      const db = testStore.store.db;
      const inbox = () => sim.context.accounts.get(PEER)?.inbox ?? [];
      try {
        const first = await liveApp(sim, { testStore });
        const ids = { instanceId: first.instanceId, liveKey: first.liveKey };
        await pairLive(sim, first, ACCOUNT);
        const sessionRows = () =>
          db
            .selectFrom('engine_auth')
            .selectAll()
            .where('instance_id', '=', ids.instanceId)
            .where('category', '=', 'session')
            .execute();
        const send = async (app: typeof first, body: string) => {
          const sent = await app.live('POST', '/v1/messages/send', { phone: PEER, body });
          assert.equal(sent.status, 200, JSON.stringify(sent.body));
          const id = String(sent.body.data.id);
          await until(`"${body}" in the inbox`, () => inbox().find((e) => e.id === id));
          return id;
        };

        await send(first, 'one');
        const saved = await sessionRows();
        assert.ok(saved.length > 0, 'the first message stored Signal sessions');
        const two = await send(first, 'two');
        await first.t.close();
        await until('the socket closed', async () =>
          (await companion(sim, ACCOUNT)).sockets === 0 ? true : undefined,
        );
        // The state a kill between the relay of "two" and its key write leaves behind.
        await db
          .deleteFrom('engine_auth')
          .where('instance_id', '=', ids.instanceId)
          .where('category', '=', 'session')
          .execute();
        await db.insertInto('engine_auth').values(saved).execute();

        const second = await liveApp(sim, { testStore, existing: ids });
        try {
          assert.equal(await second.t.services.sessions.restoreAll(), 1);
          await waitForStatus(second, true, true);
          const three = await send(second, 'three');
          assert.deepEqual(
            requests.filter((r) => r.user.phone === PEER).map((r) => [r.id, r.count]),
            [[three, 1]],
            'the phone could not decrypt "three" and asked for it once',
          );
          const four = await send(second, 'four');
          assert.equal(
            requests.filter((r) => r.id === four).length,
            0,
            'the fresh session holds: "four" decrypts the first time',
          );
          assert.deepEqual(
            inbox()
              .filter((e) => e.type === 'text')
              .map((e) => [e.text, e.from]),
            [
              ['one', ACCOUNT],
              ['two', ACCOUNT],
              ['three', ACCOUNT],
              ['four', ACCOUNT],
            ],
            'every message shown once, in order',
          );
          assert.notEqual(two, three);
        } finally {
          await second.t.close();
        }
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
