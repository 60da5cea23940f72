import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { atTurnEnd } from '../../src/ops/turn-end.ts';

/** Work deferred to the end of the event loop's turn (src/ops/turn-end.ts). */
describe('atTurnEnd', () => {
  it('runs what one turn queued together, after the turn, in order', async () => {
    const order: string[] = [];
    await new Promise<void>((resolve) => {
      atTurnEnd(() => order.push('a'));
      atTurnEnd(() => order.push('b'));
      Promise.resolve().then(() => order.push('promise job'));
      atTurnEnd(() => {
        order.push('c');
        resolve();
      });
      order.push('sync');
    });
    assert.deepEqual(order, ['sync', 'promise job', 'a', 'b', 'c']);
  });

  it('work queued by the promise jobs a turn end started runs in that turn end, before the next turn', async () => {
    const order: string[] = [];
    await new Promise<void>((resolve) => {
      atTurnEnd(() => {
        order.push('first');
        // A later turn: queued during this turn end, so it runs in the next one.
        setImmediate(() => {
          order.push('next turn');
          resolve();
        });
        // Three promise jobs later (a request going on after its read), more work for the turn end.
        void Promise.resolve()
          .then(() => undefined)
          .then(() => undefined)
          .then(() => atTurnEnd(() => order.push('chained')));
      });
    });
    assert.deepEqual(order, ['first', 'chained', 'next turn']);
  });

  it('a callback that throws is reported as a warning and does not keep the others from running', async () => {
    const ran: string[] = [];
    const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
    await new Promise<void>((resolve) => {
      atTurnEnd(() => {
        throw new Error('boom');
      });
      atTurnEnd(() => {
        ran.push('after');
        resolve();
      });
    });
    assert.deepEqual(ran, ['after']);
    assert.match((await warned).message, /boom/);
  });
});

describe('atTurnEnd chaining bound', () => {
  it('work that keeps queueing more yields to the event loop after a few passes', async () => {
    let runs = 0;
    let immediateRanAfter: number | undefined;
    await new Promise<void>((resolve) => {
      const again = () => {
        runs += 1;
        if (runs === 20) {
          resolve();
          return;
        }
        void Promise.resolve().then(() => atTurnEnd(again));
      };
      atTurnEnd(() => {
        setImmediate(() => {
          immediateRanAfter = runs;
        });
        again();
      });
    });
    assert.ok(
      immediateRanAfter !== undefined && immediateRanAfter < 20,
      `an immediate queued at the start ran after ${immediateRanAfter} of 20 passes`,
    );
  });
});
