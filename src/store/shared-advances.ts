import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import {
  ADVANCE_MANY_MARKING_POSTGRES,
  ADVANCE_UPSERT_POSTGRES,
  advanceMarking,
  advanceOf,
  type NullableAdvance,
  type RidingMarks,
} from './advance-marks.ts';
import type { AdvanceRow } from './instance-routing.ts';
import type { Database } from './schema.ts';

/**
 * `ADVANCE` of src/store/instance-routing.ts for several instances in one PostgreSQL statement: each instance of `$1`
 * that exists has its sequence advanced by its count in `$2` (its state row inserted when it has none), the rows
 * taken in the order of their ids, so two such statements lock them in one order; answered per instance with the
 * same columns as `ADVANCE`. Each id at most once (an upsert may not change one row twice).
 */
const ADVANCE_MANY_POSTGRES = `insert into webhook_state (instance_id, last_sequence)
select u.id, u.n from unnest($1::varchar[], $2::bigint[]) as u(id, n)
where exists (select 1 from instances i where i.id = u.id)
order by u.id
${ADVANCE_UPSERT_POSTGRES}`;

/** A part waiting for its sequence numbers. */
interface Waiter {
  /** The part's place in its shared transaction. */
  part: number;
  id: string;
  count: number;
  /** The sent marks riding on the part's advance (src/store/advance-marks.ts), if any. */
  marks: RidingMarks | undefined;
  resolve: (row: AdvanceRow | undefined) => void;
  reject: (error: unknown) => void;
}

/** A part's numbers as the statement answered them: the waiter and its row (undefined: no such instance). */
export interface Advanced {
  waiter: Pick<Waiter, 'part' | 'resolve' | 'reject'>;
  row: AdvanceRow | undefined;
}

/** The barrier each view of a shared transaction meets (see {@link AdvanceBarrier.join}). */
const barriers = new WeakMap<object, AdvanceBarrier>();

/**
 * The barrier `db` (a part's view of a shared transaction) takes its sequence numbers at, when it has one
 * (docs/decisions/0082-recorder-turns-on-postgres.md); `routeAndAdvance` (src/store/instance-routing.ts) waits there
 * instead of running its own statement.
 */
export function barrierOf(db: Kysely<Database>): AdvanceBarrier | undefined {
  return barriers.get(db);
}

/**
 * Where the parts of one PostgreSQL transaction shared by several instances' recorder batches take their sequence
 * numbers together (docs/decisions/0082-recorder-turns-on-postgres.md). The transaction's owner runs its parts one at
 * a time: each until it waits here for its numbers ({@link wait}) or ends. Once every part did, one statement
 * advances every waiting instance's sequence ({@link advanceAll}), and the owner resumes the waiting parts one at a
 * time, in order, each to its end. So at most one part runs statements at any moment, and each instance's numbers
 * are taken in the transaction that writes its events, with its state row locked from there to the commit, as
 * they were in a transaction of its own.
 */
export class AdvanceBarrier {
  readonly #trx: Transaction<Database>;
  #waiting: Waiter[] = [];
  /** Called when the running part starts waiting. */
  #onWait: (() => void) | undefined;
  #released = false;
  /** The part running now, set by the owner before it starts or resumes one. */
  current = 0;

  /** A barrier in `trx`, the shared transaction its statement runs in. */
  constructor(trx: Transaction<Database>) {
    this.#trx = trx;
  }

  /** Makes `view`, a part's view of the shared transaction, take its numbers here. */
  join(view: Kysely<Database>): void {
    barriers.set(view, this);
  }

  /**
   * Waits for the numbers of `count` events of instance `id`, taken with the other parts' in {@link advanceAll}, and
   * the part's sent `marks` made by the same statement (docs/decisions/0087-sent-marks-with-the-advance.md), answered
   * before the part resumes. → what `ADVANCE` answers for it, undefined when no such instance exists.
   * @throws Error when the running part already took its numbers or the barrier was released (a part takes its
   *   numbers once); the store's error of the shared statement, or the error another part failed with.
   */
  wait(id: string, count: number, marks?: RidingMarks): Promise<AdvanceRow | undefined> {
    if (this.#released || this.#waiting.some((waiter) => waiter.part === this.current))
      return Promise.reject(new Error('a part of a shared transaction takes its sequence numbers once'));
    return new Promise<AdvanceRow | undefined>((resolve, reject) => {
      this.#waiting.push({ part: this.current, id, count, marks, resolve, reject });
      const onWait = this.#onWait;
      this.#onWait = undefined;
      onWait?.();
    });
  }

  /** Whether part `part` waits here for its numbers. */
  isWaiting(part: number): boolean {
    return this.#waiting.some((waiter) => waiter.part === part);
  }

  /** Resolves once the running part waits here, or once `settled` (its outcome) settles, whichever comes first. */
  untilWaitingOr(settled: Promise<unknown>): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#onWait = resolve;
      void settled.then(() => resolve());
    });
  }

  /**
   * Takes every waiting part's numbers in one statement (several statements, one a part, when an instance waits
   * twice) and releases the barrier. → each waiter with its row, in the order they waited; resuming them is the
   * owner's.
   * @throws the store's error (every waiter is then rejected with it).
   */
  async advanceAll(): Promise<Advanced[]> {
    this.#released = true;
    const waiting = this.#waiting.splice(0);
    if (waiting.length === 0) return [];
    try {
      const ids = waiting.map((waiter) => waiter.id);
      if (new Set(ids).size !== ids.length) {
        // An instance waiting twice: one statement a part (an upsert may not change one row twice).
        const advanced: Advanced[] = [];
        for (const waiter of waiting) advanced.push({ waiter, row: await this.#advanceOne(waiter) });
        return advanced;
      }
      if (waiting.some((waiter) => waiter.marks !== undefined)) return await this.#advanceMarking(waiting);
      const rows = new Map<string, AdvanceRow>();
      const result = await this.#trx.executeQuery<AdvanceRow & { instance_id: string }>(
        CompiledQuery.raw(ADVANCE_MANY_POSTGRES, [ids, waiting.map((waiter) => waiter.count)]),
      );
      for (const row of result.rows) rows.set(row.instance_id, row);
      return waiting.map((waiter) => ({ waiter, row: rows.get(waiter.id) }));
    } catch (error) {
      for (const waiter of waiting) waiter.reject(error);
      throw error;
    }
  }

  /** One part's advance, with its marks when it carries some. → its row, undefined when its instance is gone. */
  async #advanceOne(waiter: Waiter): Promise<AdvanceRow | undefined> {
    if (waiter.marks !== undefined) return advanceMarking(this.#trx, waiter.id, waiter.count, waiter.marks);
    const result = await this.#trx.executeQuery<AdvanceRow>(
      CompiledQuery.raw(ADVANCE_MANY_POSTGRES, [[waiter.id], [waiter.count]]),
    );
    return result.rows[0];
  }

  /**
   * The advance of `waiting` (each instance once) with the marks some of them carry, in one statement
   * (`ADVANCE_MANY_MARKING_POSTGRES`): each part's marks answered. → each waiter with its row, in order.
   */
  async #advanceMarking(waiting: Waiter[]): Promise<Advanced[]> {
    const jobs = waiting.flatMap(({ id: instanceId, marks }) =>
      marks === undefined ? [] : [...new Set(marks.ids)].map((id) => ({ instanceId, id, at: marks.at })),
    );
    const { rows } = await this.#trx.executeQuery<NullableAdvance & { marked: string[] }>(
      CompiledQuery.raw(ADVANCE_MANY_MARKING_POSTGRES, [
        waiting.map((waiter) => waiter.id),
        waiting.map((waiter) => waiter.count),
        jobs.map((job) => job.instanceId),
        jobs.map((job) => job.id),
        jobs.map((job) => job.at),
      ]),
    );
    if (rows.length !== waiting.length) throw new Error('the shared advance did not answer one row a part');
    return waiting.map((waiter, index) => {
      const row = rows[index] as NullableAdvance & { marked: string[] };
      waiter.marks?.answer(new Set(row.marked));
      return { waiter, row: advanceOf(row) };
    });
  }

  /** Releases the barrier with `error`: every waiting part is rejected with it. */
  abort(error: unknown): void {
    this.#released = true;
    for (const waiter of this.#waiting.splice(0)) waiter.reject(error);
  }
}
