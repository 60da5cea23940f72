import { atTurnEnd } from './turn-end.ts';

/**
 * How a {@link TurnGroup} writes its items: several in one transaction, or one alone.
 * `T` is an item, `R` what its caller gets once it is written.
 */
export interface GroupWriter<T, R> {
  /**
   * Writes `items` (at least two) in one transaction, in the order given.
   * @returns each item's result, in the order of `items`.
   * @throws any error, and then none of the items may have been written (the transaction rolled back).
   */
  together(items: readonly T[]): Promise<R[]>;
  /** Writes one item in a transaction of its own. @throws the item's own error. */
  alone(item: T): Promise<R>;
  /**
   * Optional: true when a group's error would fail each item alone just the same (an unreachable store), so every
   * caller gets it at once instead of a second try one by one. Default: always try one by one.
   */
  failsEach?(error: unknown): boolean;
}

/** An item waiting for its group, with its caller. */
interface Waiting<T, R> {
  item: T;
  weight: number;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit over one turn of the event loop (src/ops/turn-end.ts; docs/decisions/0051-turn-groups.md): the
 * items added in a turn are written together at its end, in the order they were added, at most `max` (by weight,
 * one each by default) in one transaction, and each caller's promise settles once the transaction holding its item
 * committed. One group is written at a time; the items added meanwhile form the next one, so a group never commits
 * before an earlier one.
 * A group that fails is written again one item at a time (unless {@link GroupWriter.failsEach} says that would fail
 * alike), so a bad item fails only its own caller.
 */
export class TurnGroup<T, R> {
  readonly #writer: GroupWriter<T, R>;
  readonly #max: number;
  #waiting: Waiting<T, R>[] = [];
  #writing = false;

  /** `max`: the most weight one group holds (at least 1). No I/O until the first {@link add}. */
  constructor(writer: GroupWriter<T, R>, max: number) {
    this.#writer = writer;
    this.#max = Math.max(1, max);
  }

  /**
   * Writes `item` with the others of this turn. `weight` (default 1, at least 1) is what the item counts against
   * the group's `max`: a group takes items while their weights fit, and always at least one.
   * @returns its result, once its transaction committed.
   * @throws the writer's error for this item.
   */
  add(item: T, weight = 1): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#waiting.push({ item, weight: Math.max(1, weight), resolve, reject });
      if (this.#waiting.length === 1 && !this.#writing) atTurnEnd(() => void this.#write());
    });
  }

  /** Takes the next group from the waiting items: as many as fit in `max`, at least one. */
  #nextGroup(): Waiting<T, R>[] {
    let count = 0;
    let weight = 0;
    for (const waiting of this.#waiting) {
      if (count > 0 && weight + waiting.weight > this.#max) break;
      weight += waiting.weight;
      count += 1;
    }
    return this.#waiting.splice(0, count);
  }

  async #write(): Promise<void> {
    const group = this.#nextGroup();
    const writer = this.#writer;
    // A writer that throws instead of rejecting still settles its callers.
    const alone = (item: T) => Promise.resolve().then(() => writer.alone(item));
    this.#writing = true;
    try {
      const [only] = group;
      if (group.length === 1 && only !== undefined) {
        await alone(only.item).then(only.resolve, only.reject);
        return;
      }
      let results: R[];
      try {
        results = await Promise.resolve().then(() => writer.together(group.map((waiting) => waiting.item)));
      } catch (error) {
        let failsEach = false;
        try {
          failsEach = writer.failsEach?.(error) === true;
        } catch {
          // A broken classifier: try each item alone.
        }
        if (failsEach) {
          for (const waiting of group) waiting.reject(error);
          return;
        }
        for (const waiting of group) await alone(waiting.item).then(waiting.resolve, waiting.reject);
        return;
      }
      group.forEach((waiting, index) => {
        // `together` returns one result per item; a missing one is the writer's bug, reported to its caller.
        if (index < results.length) waiting.resolve(results[index] as R);
        else waiting.reject(new Error('a group write returned fewer results than items'));
      });
    } finally {
      this.#writing = false;
      if (this.#waiting.length > 0) atTurnEnd(() => void this.#write());
    }
  }
}
