import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EventStreamService, type EventTail } from '../../src/app/event-stream.ts';
import { type EventLogPage, type EventLogRequest, EventLogService } from '../../src/app/events.ts';
import type { Instance } from '../../src/domain/instance.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { ENTERPRISE, streamEvents } from '../support/stream-events.ts';

/**
 * Many streams of one instance (docs/decisions/0118-stream-reads-shared-in-a-turn.md): the streams a commit wakes read
 * the log at once, and those at the same position asking for the same types read the same page. They share one read
 * of the turn instead of taking a connection each: a few hundred consumers of an instance otherwise queued their
 * reads on the pool ahead of every request of the node. Each stream still gets every event once, in order.
 */

const { message, receipt } = streamEvents('3EB0C4');
/** Streams opened on one instance. */
const STREAMS = 20;

/** The event log, counting its page reads, started and settled. */
class CountingLog extends EventLogService {
  reads = 0;
  settled = 0;
  override async page(instance: Instance, request: EventLogRequest): Promise<EventLogPage> {
    this.reads++;
    try {
      return await super.page(instance, request);
    } finally {
      this.settled++;
    }
  }
}

for (const dialect of testDialects()) {
  describe(`event streams of one instance share the reads of a turn [${dialect}]`, () => {
    let t: TestApp;
    let log: CountingLog;
    let streams: EventStreamService;

    before(async () => {
      t = await createTestApp({ dialect, plan: ENTERPRISE });
      log = new CountingLog({ store: t.testStore.store });
      // No poll within the test: every read is the opening's or a commit's wake-up.
      streams = new EventStreamService({ eventLog: log, commits: t.services.commits, pollMs: 600_000 });
    });
    after(() => t.close());

    /** Opens `count` tails of `instance` after `after`, of `types` when given. */
    const open = (instance: Instance, count: number, after = 0, types?: ['Message']) =>
      Array.from({ length: count }, () =>
        streams.open(instance, { after, recheck: async () => {}, ...(types ? { types } : {}) }),
      );
    const closeAll = (tails: EventTail[]) => {
      for (const tail of tails) tail.close();
    };

    it('one read a commit for every stream at the same position; each gets the events once, in order', async () => {
      const instance = await t.newInstance('test', 'shared');
      const tails = open(instance, STREAMS);
      try {
        log.reads = 0;
        log.settled = 0;
        for (let sequence = 1; sequence <= 3; sequence++) {
          // Every stream asks for what follows its position: one read, which finds nothing; they wait.
          const asked = tails.map((tail) => tail.next());
          await eventually(
            'the streams read their position',
            () => log.reads >= 2 * sequence - 1 && log.settled === log.reads,
          );
          assert.equal(log.reads, 2 * sequence - 1, `${log.reads} reads for ${STREAMS} streams`);
          // The commit wakes them all in one turn: one more read, whose page each of them gets.
          await t.services.recorder.record(instance.id, sequence === 2 ? receipt(1) : message(sequence));
          const got = await Promise.all(asked);
          assert.deepEqual(
            got.map((events) => events?.map((event) => event.sequence)),
            tails.map(() => [sequence]),
          );
          assert.equal(
            log.reads,
            2 * sequence,
            `${log.reads} reads for ${sequence} commits of ${STREAMS} streams`,
          );
        }
      } finally {
        closeAll(tails);
      }
    });

    it('streams at other positions or of other types read their own page', async () => {
      const instance = await t.newInstance('test', 'apart');
      await t.services.recorder.record(instance.id, message(1));
      await t.services.recorder.record(instance.id, receipt(1));
      const fromZero = open(instance, 3);
      const fromOne = open(instance, 3, 1);
      const messages = open(instance, 3, 0, ['Message']);
      try {
        log.reads = 0;
        const pages = await Promise.all([...fromZero, ...fromOne, ...messages].map((tail) => tail.next()));
        assert.equal(log.reads, 3, 'one read a position and types');
        assert.deepEqual(
          pages.map((events) => events?.map((event) => event.sequence)),
          [[1, 2], [1, 2], [1, 2], [2], [2], [2], [1], [1], [1]],
        );
      } finally {
        closeAll([...fromZero, ...fromOne, ...messages]);
      }
    });
  });
}
