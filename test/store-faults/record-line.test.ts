/**
 * A session's recordings stay in the order they were emitted across a store outage (src/sessions/record-line.ts,
 * docs/decisions/0011-store-faults.md): a recording that began failing later is not tried before an older one that
 * still waits, whatever their backoffs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { RecordLine } from '../../src/sessions/record-line.ts';
import type { RecordRetryPolicy } from '../../src/sessions/record-retry.ts';
import type { Database } from '../../src/store/schema.ts';
import { capturingLogger } from '../baileys/support.ts';
import { createTestStore, storeOutage, testDialects } from '../support/store.ts';

const PEER = '5511988887777@s.whatsapp.net';
const OWN = '5511999990001@s.whatsapp.net';

/** Waits of 10 ms doubling to 10 s, no jitter: the try after the sixth failure waits 320 ms. */
const POLICY: RecordRetryPolicy = {
  baseDelayMs: 10,
  maxDelayMs: 10_000,
  unknownAttempts: 5,
  random: () => 0.5,
};

function sent(id: string): EngineEvent {
  return {
    type: 'message',
    message: {
      id,
      source: { chat: PEER, sender: OWN, isFromMe: true, isGroup: false },
      pushName: '',
      timestamp: Date.now(),
      content: { kind: 'text', text: 'hi' },
    },
  };
}

/** The peer's read receipt of message `id`. */
function readReceipt(id: string): EngineEvent {
  return {
    type: 'receipt',
    state: 'read',
    messageIds: [id],
    source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
    timestamp: Date.now(),
  };
}

/** The stored state of message `id` of the instance, as `{ state }`, or undefined when it is not stored. */
function stateOf(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
): Promise<{ state: string } | undefined> {
  return db
    .selectFrom('messages')
    .select('state')
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Resolves when `ready` is true, checked whenever `poke` is called. */
function condition(ready: () => boolean): { poke: () => void; reached: Promise<void> } {
  let resolve: () => void = () => undefined;
  const reached = new Promise<void>((done) => {
    resolve = done;
  });
  return {
    poke: () => {
      if (ready()) resolve();
    },
    reached,
  };
}

for (const dialect of testDialects()) {
  describe(`a session's recordings across a store outage [${dialect}]`, () => {
    it('a send whose recording has been failing, then the read receipt for it: the message ends read', async () => {
      let down = false;
      const ts = await createTestStore(dialect, {
        faults: () => {
          if (down) throw storeOutage(dialect);
        },
      });
      try {
        const db = ts.store.db;
        const org = await adminCreateOrg(db, { name: `o${Math.random()}`, plan: 'pro' });
        const instance = await adminCreateInstance(db, { org: org.id, env: 'live', name: 'line' });
        const { logger } = capturingLogger();
        const recorder = new EventRecorder(db, [new MessageProjection(Date.now)], logger);
        const line = new RecordLine(POLICY, logger);
        const id = '3EB0LINE0000000001';
        let sendTries = 0;
        const sixFailures = condition(() => sendTries >= 6);
        const applied: string[] = [];
        const record = (event: EngineEvent, counted: boolean) => async () => {
          try {
            await recorder.record(instance.id, event);
            applied.push(event.type);
          } finally {
            if (counted) {
              sendTries += 1;
              sixFailures.poke();
            }
          }
        };

        down = true;
        // The relay's record of the send (src/engines/baileys/operations.ts), through the session's emit.
        const send = sent(id);
        const sending = line.record(record(send, true), send);
        // Six tries failed: its next waits 320 ms.
        await sixFailures.reached;
        // The peer read it: the receipt comes through the engine's incoming queue, the session's emit again. The
        // store is back at once, long before the send's next try.
        const receipt = readReceipt(id);
        const reading = line.record(record(receipt, false), receipt);
        down = false;
        await Promise.all([sending, reading]);

        assert.deepEqual(applied, ['message', 'receipt'], 'recorded in the order emitted');
        assert.deepEqual(await stateOf(db, instance.id, id), { state: 'read' });
      } finally {
        await ts.cleanup();
      }
    });

    it('a message and its receipt in one batch, the message failing again when tried alone: the receipt waits for it', async () => {
      const id = '3EB0LINE0000000003';
      const receipt = readReceipt(id);
      const { logger } = capturingLogger();
      const line = new RecordLine(POLICY, logger);
      const applied: string[] = [];
      let failures = 0;
      const ts = await createTestStore(dialect, {
        // The batch's write of the message fails, and so does its try alone; the store answers after that.
        faults: (sql) => {
          if (failures >= 2 || !/insert into "messages"/i.test(sql)) return;
          failures += 1;
          throw storeOutage(dialect);
        },
      });
      try {
        const db = ts.store.db;
        const org = await adminCreateOrg(db, { name: `o${Math.random()}`, plan: 'pro' });
        const instance = await adminCreateInstance(db, { org: org.id, env: 'live', name: 'line' });
        const recorder = new EventRecorder(db, [new MessageProjection(Date.now)], logger);
        const record = (event: EngineEvent) => async () => {
          await recorder.record(instance.id, event);
          applied.push(event.type);
        };
        const send = sent(id);
        // Emitted together: both first tries join the recorder's one batch.
        await Promise.all([line.record(record(send), send), line.record(record(receipt), receipt)]);

        assert.equal(failures, 2);
        assert.deepEqual(applied, ['message', 'receipt'], 'recorded in the order emitted');
        assert.deepEqual(await stateOf(db, instance.id, id), { state: 'read' });
      } finally {
        await ts.cleanup();
      }
    });

    it('a message whose batch met one store failure, and the receipt queued behind it: the receipt is not applied first', async () => {
      const id = '3EB0LINE0000000002';
      const receipt = readReceipt(id);
      const { logger } = capturingLogger();
      const line = new RecordLine(POLICY, logger);
      const applied: string[] = [];
      /** Set once the recorder and its instance exist: hands the receipt to the line (its first try at once). */
      let emitReceipt: () => void = () => undefined;
      let failures = 0;
      const ts = await createTestStore(dialect, {
        // The message's one failed statement (a terminated connection, a busy file); the store answers right after.
        faults: (sql) => {
          if (failures > 0 || !/insert into "messages"/i.test(sql)) return;
          failures += 1;
          // The peer's receipt is emitted while the message's batch runs: its first try joins the recorder's queue.
          emitReceipt();
          throw storeOutage(dialect);
        },
      });
      try {
        const db = ts.store.db;
        const org = await adminCreateOrg(db, { name: `o${Math.random()}`, plan: 'pro' });
        const instance = await adminCreateInstance(db, { org: org.id, env: 'live', name: 'line' });
        const recorder = new EventRecorder(db, [new MessageProjection(Date.now)], logger);
        const record = (event: EngineEvent) => async () => {
          await recorder.record(instance.id, event);
          applied.push(event.type);
        };
        let reading: Promise<void> = Promise.resolve();
        emitReceipt = () => {
          reading = line.record(record(receipt), receipt);
        };
        const send = sent(id);
        await line.record(record(send), send);
        await reading;

        assert.equal(failures, 1);
        assert.deepEqual(applied, ['message', 'receipt'], 'recorded in the order emitted');
        assert.deepEqual(await stateOf(db, instance.id, id), { state: 'read' });
      } finally {
        await ts.cleanup();
      }
    });
  });
}

describe('the record line', () => {
  const { logger } = capturingLogger();
  const outage = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

  it('tries recordings at once while nothing waits: two emitted together are both handed over before either ends', async () => {
    const line = new RecordLine(POLICY, logger);
    const started: string[] = [];
    const ends: (() => void)[] = [];
    const held = (name: string) => () =>
      new Promise<void>((resolve) => {
        started.push(name);
        ends.push(resolve);
      });
    const a = line.record(held('a'), sent('A'));
    const b = line.record(held('b'), sent('B'));
    // Both first tries run together (the recorder batches them).
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual(started, ['a', 'b']);
    for (const end of ends) end();
    await Promise.all([a, b]);
  });

  it('older first: B failing fast waits for A failing slowly, C emitted meanwhile waits behind both', async () => {
    const line = new RecordLine({ ...POLICY, baseDelayMs: 1, maxDelayMs: 2 }, logger);
    const order: string[] = [];
    let releaseA: (error?: Error) => void = () => undefined;
    let aTries = 0;
    const recordA = () => {
      aTries += 1;
      if (aTries > 1) {
        order.push('A');
        return Promise.resolve();
      }
      // A's first try is slow and fails.
      return new Promise<void>((resolve, reject) => {
        releaseA = (error) => (error ? reject(error) : resolve());
      });
    };
    let bTries = 0;
    const recordB = async () => {
      bTries += 1;
      if (bTries === 1) throw outage();
      order.push('B');
    };
    const recordC = async () => {
      order.push('C');
    };
    const a = line.record(recordA, sent('A'));
    const b = line.record(recordB, sent('B'));
    // B has failed and waits in the line; A's first try still runs.
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.equal(bTries, 1);
    const c = line.record(recordC, sent('C'));
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual(order, [], 'nothing overtakes A while its first try runs');
    releaseA(outage());
    await Promise.all([a, b, c]);
    assert.deepEqual(order, ['A', 'B', 'C']);
  });

  it('a recording given up (a permanent error) lets the next one go', async () => {
    const line = new RecordLine({ ...POLICY, baseDelayMs: 1, maxDelayMs: 2 }, logger);
    let aTries = 0;
    const recordA = async () => {
      aTries += 1;
      if (aTries === 1) throw outage();
      throw Object.assign(new Error('duplicate key'), { code: '23505' });
    };
    const a = line.record(recordA, sent('A'));
    let recordedB = false;
    const b = line.record(async () => {
      recordedB = true;
    }, sent('B'));
    await assert.rejects(a, /duplicate key/);
    await b;
    assert.equal(recordedB, true);
    assert.equal(aTries, 2);
  });
});
