import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { StoreClock } from '../../src/nodes/store-clock.ts';
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
});
