/**
 * The pace and pause the holder of an instance keeps in memory (src/sends/pause.ts `PaceKeeper`,
 * docs/decisions/0013-pacing.md) never keep what a read returned when a write changed them while that read ran. Before,
 * a read of the pace under way when a new pace was stored (the queue's drain reads it at each pass) kept the pace it
 * had read before the write, after the write had dropped the old one: the holder went on with the old pace (no
 * interval, no cap: synchronous sends relayed at once) until its next login. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import type { SendQueue } from '../../src/sends/queue.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue } from './support.ts';

const PACE = { minIntervalMs: 60_000, jitterMs: 0, newChatsPerDay: 5 };

/**
 * `db` whose reads of `send_pacing` (a `selectFrom('send_pacing')` ended by `executeTakeFirst`) call `after` once they
 * have their rows and the connection is given back, and answer when it resolves: a read that has read the store and not
 * answered yet, on SQLite's one connection as on PostgreSQL's pool. Everything else is `db`'s own.
 */
function withPaceReadsHeld(db: Kysely<Database>, after: () => Promise<void>): Kysely<Database> {
  const wrap = <T extends object>(target: T, paceRead: boolean): T =>
    new Proxy(target, {
      get(object, property) {
        const value: unknown = Reflect.get(object, property, object);
        if (typeof value !== 'function') return value;
        if (paceRead && property === 'executeTakeFirst')
          return async (...args: unknown[]) => {
            const rows: unknown = await value.apply(object, args);
            await after();
            return rows;
          };
        return (...args: unknown[]) => {
          const made: unknown = value.apply(object, args);
          if (property === 'selectFrom') return wrap(made as object, args[0] === 'send_pacing');
          return paceRead && typeof made === 'object' && made !== null ? wrap(made, true) : made;
        };
      },
    });
  return wrap(db, false);
}

for (const dialect of testDialects()) {
  describe(`the pace kept in memory is never older than the last one stored [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    /** The next read of the pace waits for this before it answers. */
    let held: { reached: boolean; go: Promise<void> } | undefined;

    before(async () => {
      t = await createTestApp({ dialect });
      const session = fakeSession(async (message) => ({ id: message.id ?? '', timestamp: t.clock() }));
      const db = withPaceReadsHeld(t.services.store.db, async () => {
        const hold = held;
        held = undefined;
        if (!hold) return;
        hold.reached = true;
        await hold.go;
      });
      queue = testQueue(t.clock, db, t.instance.id, session);
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('a read under way while a new pace is stored does not bring the old one back', async () => {
      let go: () => void = () => undefined;
      const hold = {
        reached: false,
        go: new Promise<void>((resolve) => {
          go = resolve;
        }),
      };
      held = hold;
      // A read of the pace (the drain's, say) has read the store and not yet answered when a new pace is stored.
      const earlier = queue.pacing(t.instance.id);
      await eventually('the read under way', () => hold.reached);
      assert.deepEqual((await queue.setPacing(t.instance.id, PACE)).pacing, PACE);
      go();
      assert.deepEqual(
        (await earlier).pacing,
        { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null },
        'what it read before',
      );
      assert.deepEqual((await queue.pacing(t.instance.id)).pacing, PACE, 'the pace stored last');
    });
  });
}
