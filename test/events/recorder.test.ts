import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Transaction } from 'kysely';
import pino from 'pino';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { type EventProjection, EventRecorder } from '../../src/events/recorder.ts';
import type { Database } from '../../src/store/schema.ts';
import { TurnTransactions } from '../../src/store/turn-transactions.ts';
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

  describe(`event recorder grouping instances (docs/decisions/0051-turn-groups.md) [${dialect}]`, () => {
    let ts: TestStore;
    before(async () => {
      ts = await createTestStore(dialect);
    });
    after(() => ts.cleanup());

    /** Logs what each projection call saw: the instance, its events and the transaction. */
    class Phases extends Probe {
      readonly phases: { phase: 'prepare' | 'flush'; instanceId: string; trx: Transaction<Database> }[] = [];
      readonly applied: { instanceId: string; n: number }[] = [];

      override async apply(
        trx: Transaction<Database>,
        instanceId: string,
        event: EngineEvent,
      ): Promise<void> {
        if (event.type === 'contacts')
          this.applied.push({ instanceId, n: Number(event.contacts[0]?.pushName.slice(1)) });
        await super.apply(trx, instanceId, event);
      }

      async prepare(trx: Transaction<Database>, instanceId: string): Promise<void> {
        this.phases.push({ phase: 'prepare', instanceId, trx });
      }

      async flush(trx: Transaction<Database>, instanceId: string): Promise<void> {
        this.phases.push({ phase: 'flush', instanceId, trx });
      }
    }

    it('the batches of instances ready in one turn share one transaction, each prepared and flushed on its own', async () => {
      const probe = new Phases();
      const recorder = new EventRecorder(ts.store.db, [probe], pino({ level: 'silent' }), {
        turn: new TurnTransactions(ts.store.db),
      });
      const events = [
        ['a', 300],
        ['b', 301],
        ['a', 302],
        ['c', 303],
        ['b', 304],
      ] as const;
      await Promise.all(events.map(([instanceId, n]) => recorder.record(instanceId, contactEvent(n))));
      await recorder.drain();
      assert.equal(new Set(probe.seen.map((s) => s.trx)).size, 1, 'one transaction');
      // Each instance's batch whole, in emission order, between its own prepare and flush.
      assert.deepEqual(
        probe.phases.map((p) => `${p.phase} ${p.instanceId}`),
        ['prepare a', 'flush a', 'prepare b', 'flush b', 'prepare c', 'flush c'],
      );
      assert.deepEqual(
        probe.applied.map((a) => `${a.instanceId} ${a.n}`),
        ['a 300', 'a 302', 'b 301', 'b 304', 'c 303'],
      );
      assert.deepEqual(probe.committed, [300, 302, 301, 304, 303]);
      const rows = await ts.store.db
        .selectFrom('organizations')
        .select('id')
        .where('id', 'in', ['probe-300', 'probe-301', 'probe-302', 'probe-303', 'probe-304'])
        .execute();
      assert.equal(rows.length, 5);
    });

    it("an instance's failing event fails alone: the other instances and the rest of its batch commit", async () => {
      const probe = new Phases();
      probe.failOn.add(312);
      const recorder = new EventRecorder(ts.store.db, [probe], pino({ level: 'silent' }), {
        turn: new TurnTransactions(ts.store.db),
      });
      const events = [
        ['a', 310],
        ['b', 311],
        ['b', 312],
        ['b', 313],
        ['c', 314],
      ] as const;
      const outcomes = await Promise.allSettled(
        events.map(([instanceId, n]) => recorder.record(instanceId, contactEvent(n))),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
      );
      const rows = await ts.store.db
        .selectFrom('organizations')
        .select('id')
        .where('id', 'in', ['probe-310', 'probe-311', 'probe-312', 'probe-313', 'probe-314'])
        .orderBy('id')
        .execute();
      assert.deepEqual(
        rows.map((r) => r.id),
        ['probe-310', 'probe-311', 'probe-313', 'probe-314'],
      );
      assert.deepEqual([...probe.committed].sort(), [310, 311, 313, 314]);
      await recorder.drain();
    });
  });
}
