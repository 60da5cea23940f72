/**
 * The status's count of due sends at a new hold of the instance (docs/decisions/0111-status-reads-the-queue-it-holds.md,
 * docs/decisions/0008-leases-and-fencing.md): this process held the instance and its queue went idle; the instance
 * moved to another node and back (its session released here, then made again), and meanwhile the other node's queue
 * was paused by the platform (429) and accepted sends that wait for the pause's end. At the new hold's login the
 * drain hands back and stops at the pause, before any claim or read of the first pending job: the queue's memory
 * still says what it knew at the old hold. The count must be the store's. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { countDueSendJobs } from '../../src/store/send-job-claims.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { writePause } from '../../src/store/send-pacing.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob, untilRelayedAtOnce } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
/** How long the other node's pause lasts: its end's wake never fires during the test. */
const PAUSE_MS = 600_000;

for (const dialect of testDialects()) {
  describe(`the status's count of due sends at a new hold under a pause [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    let queue: SendQueue;
    let session: EngineSession;
    /** Whether this process holds the instance's session (false while the other node holds it). */
    let held = true;
    /** Statements counting the due sends the store ran. */
    let counts = 0;

    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (text) => {
          if (/send_jobs/.test(text) && /count\(\*\)/i.test(text)) counts += 1;
        },
      });
      t = await createTestApp({ dialect, testStore });
      t.clock.set(T0);
      session = fakeSession(async (message) => ({ id: message.id ?? '', timestamp: t.clock() }));
      queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, undefined, {
        session: (id) => (held && id === t.instance.id ? session : undefined),
      });
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, 'HOLD-WARM-UP');
      await eventually('the queue idle', async () => {
        const before = counts;
        const value = await queue.pendingSends(t.instance.id);
        return counts === before && value === 0;
      });
    });
    after(async () => {
      await queue.stop();
      await t.close();
      await testStore.cleanup();
    });

    it('counts the sends the other node accepted while its queue was paused', async () => {
      const db = t.services.store.db;
      const instanceId = t.instance.id;
      // The instance moves to the other node: the session here is released.
      held = false;
      // The other node: the platform paused its queue, and it accepted a send that waits for the pause's end.
      await writePause(db, instanceId, { reason: 'rate-overlimit', until: t.clock() + PAUSE_MS }, t.clock());
      await insertSendJob(db, textJob(instanceId, '3EB0NEWHOLD00000000A1', 'async', t.clock()));
      // The instance comes back here: a new session, whose login commits (queue.ts `afterCommit`).
      held = true;
      queue.afterCommit(instanceId, {
        type: 'connection',
        state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
      });
      // The login's drain ends (it hands back, reads the pause, claims no synchronous send and waits for the pause's
      // end); stopping the queue waits for it.
      await queue.stop();
      const stored = await countDueSendJobs(db, instanceId, t.clock());
      assert.equal(stored, 1, 'the store holds the paused send, due');
      assert.equal(await queue.pendingSends(instanceId), stored, 'the status counts what the store holds');
    });
  });
}
