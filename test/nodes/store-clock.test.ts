import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KyselyPlugin } from 'kysely';
import pino from 'pino';
import { NodeRegistry } from '../../src/nodes/registry.ts';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore } from '../support/store.ts';

/**
 * The store's clock as a node estimates it (docs/decisions/0008-leases-and-fencing.md, "One clock"): the last
 * reading plus the monotonic time since, whatever this node's wall clock does.
 */

describe('StoreClock', () => {
  it("follows the store's reading and the monotonic clock, never the wall clock", async () => {
    const testStore = await createTestStore('sqlite');
    try {
      let store = 1_000_000;
      let wall = 1_000_000;
      let monotonic = 50;
      const errors: unknown[] = [];
      const logger = pino({ level: 'error' }, { write: (line: string) => errors.push(JSON.parse(line)) });
      const clock = new StoreClock({
        db: testStore.store.db,
        logger,
        read: async () => store,
        wall: () => wall,
        monotonic: () => monotonic,
        skewErrorMs: 8000,
      });
      assert.equal(clock.synced, false);
      await clock.sync();
      assert.equal(clock.synced, true);
      assert.equal(clock.now(), 1_000_000);
      monotonic += 2_000;
      wall += 60_000 + 2_000;
      assert.equal(clock.now(), 1_002_000, 'a forward step of the wall clock changes nothing');
      wall -= 120_000;
      assert.equal(clock.now(), 1_002_000, 'nor a backward one');
      assert.equal(errors.length, 0);
      store = 1_002_000;
      await clock.sync();
      assert.equal(errors.length, 1, "a wall clock a lease lifetime from the store's is logged");
      await clock.sync();
      assert.equal(errors.length, 1, 'once');
    } finally {
      await testStore.cleanup();
    }
  });

  it('never answers less than before for a sync reading a little behind, and follows a store clock set back', async () => {
    const testStore = await createTestStore('sqlite');
    try {
      let store = 1_000_000;
      let monotonic = 50;
      const clock = new StoreClock({
        db: testStore.store.db,
        logger: pino({ level: 'silent' }),
        read: async () => store,
        wall: () => store,
        monotonic: () => monotonic,
      });
      await clock.sync();
      monotonic += 100;
      assert.equal(clock.now(), 1_000_100);
      // The next reading is 5 ms behind the estimate (a round trip's error): the answer holds at the earlier one.
      store = 1_000_095;
      await clock.sync();
      assert.equal(clock.now(), 1_000_100, 'held at what it answered');
      monotonic += 3;
      assert.equal(clock.now(), 1_000_100, 'until the new estimate passes it');
      monotonic += 7;
      assert.equal(clock.now(), 1_000_105);
      // The store's clock set back by a minute: followed at once.
      store = 940_000;
      await clock.sync();
      assert.equal(clock.now(), 940_000);
      monotonic += 1;
      assert.equal(clock.now(), 940_001);
    } finally {
      await testStore.cleanup();
    }
  });

  it("reads PostgreSQL's clock", { skip: !process.env.TEST_DATABASE_URL }, async () => {
    const testStore = await createTestStore('postgres');
    try {
      const clock = new StoreClock({
        db: testStore.store.db,
        logger: pino({ level: 'silent' }),
        wall: () => 0,
      });
      await clock.sync();
      assert.ok(Math.abs(clock.now() - Date.now()) < 5_000, 'the store on this machine shares its clock');
      assert.ok(Number.isInteger(clock.now()));
    } finally {
      await testStore.cleanup();
    }
  });

  it("reads the store once for syncs asked for together: the users of one node's clock share a read", async () => {
    const testStore = await createTestStore('sqlite');
    try {
      /** The reads in flight, answered by the test. */
      const pending: ((ms: number) => void)[] = [];
      let reads = 0;
      const answer = (ms: number) => {
        for (const resolve of pending.splice(0)) resolve(ms);
      };
      const clock = new StoreClock({
        db: testStore.store.db,
        logger: pino({ level: 'silent' }),
        read: () => {
          reads += 1;
          return new Promise<number>((resolve) => {
            pending.push(resolve);
          });
        },
      });
      const together = Promise.all([clock.sync(), clock.sync()]);
      answer(1_000_000);
      await together;
      assert.equal(reads, 1, 'two syncs at once read the store twice');
      assert.equal(clock.synced, true);
      const next = clock.sync();
      answer(2_000_000);
      await next;
      assert.equal(reads, 2, 'a sync after the last one ended reads again');
    } finally {
      await testStore.cleanup();
    }
  });

  it("the registry reads the store's clock once a heartbeat: its sweep judges on the heartbeat's reading", async () => {
    const testStore = await createTestStore('sqlite');
    let registry: NodeRegistry | undefined;
    try {
      let syncs = 0;
      const clock = {
        now: () => Date.now(),
        sync: async () => {
          syncs += 1;
        },
      };
      let beats = 0;
      /** Counts the heartbeats: the updates of `nodes` setting `heartbeat_at`. */
      const counter: KyselyPlugin = {
        transformQuery: ({ node }) => {
          if (node.kind === 'UpdateQueryNode' && JSON.stringify(node).includes('"heartbeat_at"')) beats += 1;
          return node;
        },
        transformResult: async ({ result }) => result,
      };
      registry = new NodeRegistry({
        db: testStore.store.db.withPlugin(counter),
        logger: pino({ level: 'silent' }),
        id: 'node-one-read',
        heartbeatMs: 20,
        deadAfterMs: 10_000,
        clock,
      });
      await registry.start();
      const [syncsAtStart, beatsAtStart] = [syncs, beats];
      await eventually('five heartbeats', () => beats - beatsAtStart >= 5);
      await registry.stop();
      registry = undefined;
      assert.equal(
        syncs - syncsAtStart,
        beats - beatsAtStart,
        'reads of the store clock per heartbeat round',
      );
    } finally {
      await registry?.stop();
      await testStore.cleanup();
    }
  });
});
