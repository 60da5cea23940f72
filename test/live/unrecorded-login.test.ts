/**
 * A live login whose connection state the store refuses to record (a permanent store error on the login's write of
 * the instance row, injected through the store's test-only fault hook, so the recording is given up): the session
 * is connected all the same, and its send queue drains (docs/decisions/0009-sends-as-jobs.md). The case that shows
 * it: a queued send the platform never acknowledged (the simulator's `withhold-acks`) leaves its job `sending` and
 * the queue waiting for the next login; that login's state is refused. Before, the queue heard of logins only from
 * their recorded state, so it went on waiting while the session was connected, and the job and every send accepted
 * after it stayed unrelayed until some later reconnect. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is
 * set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { checkViolation, createTestStore, type TestStore, testDialects } from '../support/store.ts';
import {
  control,
  type LiveApp,
  liveApp,
  pairLive,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

const SHOP = '5541999990041';
const ANA = '5541988880041';
/** How long the engine waits for an ack here, ms. */
const ACK_MS = 2_000;

for (const dialect of testDialects()) {
  describe(`live engine: a login whose state could not be recorded (${dialect})`, () => {
    let sim: Simulator;
    let testStore: TestStore;
    let app: LiveApp;
    /** While true, every statement writing a login into the instance row fails. */
    let refusing = false;
    let refused = 0;

    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (refusing && /^update "instances" set "jid"/i.test(sql) && /last_connected_at/.test(sql)) {
            refused += 1;
            throw checkViolation('instances');
          }
        },
      });
      sim = await startTestSimulator();
      app = await liveApp(sim, { testStore, tuning: { ackTimeoutMs: ACK_MS } });
      for (const [phone, pushName] of [
        [SHOP, 'Shop'],
        [ANA, 'Ana'],
      ] as const) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, SHOP);
    });
    after(async () => {
      await app.t.close();
      await sim.close();
      await testStore.cleanup();
    });

    const queue = (body: string) =>
      app.t.call(
        'POST',
        `/v1/messages/send?from=${app.instanceId}`,
        { phone: ANA, body },
        { authorization: `Bearer ${app.liveKey}`, prefer: 'respond-async' },
      );
    const job = (id: string) =>
      testStore.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts'])
        .where('instance_id', '=', app.instanceId)
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const logins = async () =>
      (
        (await control(sim, 'GET', '/connections')).body.attempts as { phone?: string; loggedIn: boolean }[]
      ).filter((a) => a.phone === SHOP && a.loggedIn).length;
    /** The texts Ana's phone shows from the shop, each with the copies of it that arrived after the first. */
    const shown = () =>
      (sim.context.accounts.get(ANA)?.inbox ?? [])
        .filter((entry) => entry.from === SHOP && entry.type === 'text')
        .map((entry) => [entry.text, entry.copies ?? 0]);

    it('the unacknowledged send and the one queued behind it go out on the new connection, in order, once', async () => {
      const before = await logins();
      const withheld = await control(sim, 'POST', '/faults', { phone: SHOP, kind: 'withhold-acks' });
      assert.equal(withheld.status, 200, JSON.stringify(withheld.body));
      refusing = true;
      try {
        const first = await queue('never acknowledged');
        assert.equal(first.status, 202, JSON.stringify(first.body));
        const firstId: string = first.body.data.id;
        await until('the connection without acks replaced by a login', async () =>
          (await logins()) > before ? true : undefined,
        );
        await until('the new login refused', () => (refused > 0 ? true : undefined));
        await waitForStatus(app, true, true);
        const second = await queue('queued behind it');
        assert.equal(second.status, 202, JSON.stringify(second.body));
        const secondId: string = second.body.data.id;
        await until('both jobs sent while the login stays unrecorded', async () =>
          (await job(firstId)).status === 'sent' && (await job(secondId)).status === 'sent'
            ? true
            : undefined,
        );
        assert.deepEqual({ ...(await job(firstId)) }, { status: 'sent', attempts: 2 });
        assert.deepEqual({ ...(await job(secondId)) }, { status: 'sent', attempts: 1 });
        assert.equal(await logins(), before + 1, 'no other login was needed');
      } finally {
        refusing = false;
      }
      assert.deepEqual(
        shown(),
        [
          ['never acknowledged', 1],
          ['queued behind it', 0],
        ],
        'each once on the phone (the relay made again counted as a copy), in acceptance order',
      );
    });
  });
}
