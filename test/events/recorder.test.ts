import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Transaction } from 'kysely';
import pino from 'pino';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { type EventProjection, EventRecorder } from '../../src/events/recorder.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

function contactEvent(n: number): EngineEvent {
  return {
    type: 'contacts',
    contacts: [
      { jid: `${n}@s.whatsapp.net`, businessName: '', firstName: '', fullName: '', pushName: `n${n}` },
    ],
  };
}

/** Writes each event's number as an organization row (a real write in the recorder's transaction). */
class Probe implements EventProjection {
  readonly name = 'probe';
  readonly seen: { n: number; trx: Transaction<Database> }[] = [];
  readonly failOn = new Set<number>();
  committed: number[] = [];

  async apply(trx: Transaction<Database>, _instanceId: string, event: EngineEvent): Promise<void> {
    if (event.type !== 'contacts') return;
    const n = Number(event.contacts[0]?.pushName.slice(1));
    this.seen.push({ n, trx });
    await trx
      .insertInto('organizations')
      .values({
        id: `probe-${n}`,
        name: `probe-${n}`,
        plan: 'free',
        per_minute: null,
        per_day: null,
        created_at: n,
      })
      .execute();
    if (this.failOn.has(n)) throw new Error(`event ${n} refused`);
  }

  afterCommit(_instanceId: string, event: EngineEvent): void {
    if (event.type === 'contacts') this.committed.push(Number(event.contacts[0]?.pushName.slice(1)));
  }
}

for (const dialect of testDialects()) {
  describe(`event recorder group commit (docs/decisions/0024-engines-and-data-flow.md, docs/decisions/0005-outbox-and-delivery.md) [${dialect}]`, () => {
    let ts: TestStore;
    before(async () => {
      ts = await createTestStore(dialect);
    });
    after(() => ts.cleanup());

    it('applies concurrent events of one instance in order, several per transaction, each settled after commit', async () => {
      const probe = new Probe();
      const recorder = new EventRecorder(ts.store.db, [probe], pino({ level: 'silent' }));
      const settled: number[] = [];
      await Promise.all(
        Array.from({ length: 60 }, (_, n) =>
          recorder.record('instance-a', contactEvent(n)).then(() => settled.push(n)),
        ),
      );
      assert.deepEqual(
        probe.seen.map((s) => s.n),
        Array.from({ length: 60 }, (_, n) => n),
        'emission order',
      );
      assert.deepEqual(
        probe.committed,
        probe.seen.map((s) => s.n),
      );
      assert.deepEqual(
        settled,
        Array.from({ length: 60 }, (_, n) => n),
      );
      const transactions = new Set(probe.seen.map((s) => s.trx)).size;
      assert.ok(transactions < 60 && transactions >= 1, `60 events in ${transactions} transactions`);
      const rows = await ts.store.db
        .selectFrom('organizations')
        .select('id')
        .where('id', 'like', 'probe-%')
        .execute();
      assert.equal(rows.length, 60);
      await recorder.drain();
    });

    it('a failing event fails alone: the rest of its batch commits', async () => {
      const probe = new Probe();
      probe.failOn.add(103);
      const recorder = new EventRecorder(ts.store.db, [probe], pino({ level: 'silent' }));
      const outcomes = await Promise.allSettled(
        [100, 101, 102, 103, 104, 105].map((n) => recorder.record('instance-b', contactEvent(n))),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
      );
      const rows = await ts.store.db
        .selectFrom('organizations')
        .select('id')
        .where('id', 'in', ['probe-100', 'probe-101', 'probe-102', 'probe-103', 'probe-104', 'probe-105'])
        .orderBy('id')
        .execute();
      assert.deepEqual(
        rows.map((r) => r.id),
        ['probe-100', 'probe-101', 'probe-102', 'probe-104', 'probe-105'],
      );
      assert.deepEqual(probe.committed, [100, 101, 102, 104, 105]);
    });

    it('instances do not wait for each other and idle instances leave nothing behind', async () => {
      const probe = new Probe();
      const recorder = new EventRecorder(ts.store.db, [probe], pino({ level: 'silent' }));
      await Promise.all([recorder.record('x', contactEvent(200)), recorder.record('y', contactEvent(201))]);
      await recorder.drain();
      assert.deepEqual(probe.committed.sort(), [200, 201]);
    });
  });
}
