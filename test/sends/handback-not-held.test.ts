/**
 * A queue that does not hold an instance's engine session never hands back that instance's `sending` jobs
 * (docs/decisions/0009-sends-as-jobs.md: the hand-back is the holder's, before its first claim after a login). A send
 * accepted on a node with no session of the instance (queued while no node served it, its request routed before
 * another node took the instance) wakes that node's queue for the instance; before, its first pass handed back the
 * jobs the new holder was relaying, and that holder claimed and relayed them a second time.
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { extended } from '../../src/domain/objects.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { findSendJob, insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`send queue: a node not holding the instance [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    const relayed: string[] = [];
    const session = fakeSession(async (message) => {
      relayed.push(message.id ?? '');
      return { id: message.id ?? '', timestamp: t.clock() };
    });

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      // This node holds no session of the instance: another node does, and relays its jobs.
      queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, async () => undefined, {
        session: () => undefined,
      });
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it("leaves the jobs another node's relay holds `sending` when a send accepted here wakes its queue", async () => {
      const db = t.services.store.db;
      const relaying = '3EB0NOTHELDRELAYING0001';
      await insertSendJob(
        db,
        extended(textJob(t.instance.id, relaying, 'sync', t.clock()), { claimedBy: 'other-node' }),
      );
      const accepted = '3EB0NOTHELDACCEPTED0002';
      t.clock.advance(1);
      assert.equal(await queue.store(textJob(t.instance.id, accepted, 'async', t.clock())), 'stored');
      queue.submitted(t.instance.id);
      // The pass the submission started ends before the stop returns (it waits for the queue's work in flight).
      await queue.stop();
      const held = await findSendJob(db, t.instance.id, relaying);
      assert.deepEqual([held?.status, held?.lockedBy, held?.attempts], ['sending', 'other-node', 1]);
      const waiting = await findSendJob(db, t.instance.id, accepted);
      assert.deepEqual([waiting?.status, waiting?.attempts], ['pending', 0]);
      assert.deepEqual(relayed, [], 'nothing relayed by a node without the session');
    });
  });
}
