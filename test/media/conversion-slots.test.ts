/**
 * ConversionSlots (src/media/conversion-slots.ts, docs/decisions/0017-messages-and-media.md): at most `limit` tasks
 * run at once, the others wait in arrival order, a slot is freed whether a task resolves or rejects, and past
 * `maxWaiting` waiting a task is refused at once with 503.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { statusOf } from '../../src/http/errors.ts';
import { ConversionSlots } from '../../src/media/conversion-slots.ts';

/** A task that runs until `release` is called, noting its start in `started`. */
function held(name: string, started: string[]) {
  let release: (fail?: boolean) => void = () => {};
  const task = () =>
    new Promise<string>((resolve, reject) => {
      started.push(name);
      release = (fail) => (fail ? reject(new Error(`${name} failed`)) : resolve(name));
    });
  return { task, release: (fail?: boolean) => release(fail) };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('conversion slots', () => {
  it('runs at most limit at once, the rest in arrival order; a failure frees its slot; past maxWaiting 503', async () => {
    const slots = new ConversionSlots(2, 2, 'sticker');
    const started: string[] = [];
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => held(name, started));
    assert.ok(a && b && c && d);
    const runs = [slots.run(a.task), slots.run(b.task), slots.run(c.task), slots.run(d.task)];
    await turn();
    assert.deepEqual(started, ['a', 'b']);
    assert.deepEqual([slots.running, slots.waiting], [2, 2]);
    await assert.rejects(
      slots.run(async () => 'e'),
      (e) => {
        assert.ok(e instanceof DomainError);
        assert.deepEqual([statusOf(e.code), e.message], [503, 'sticker conversions are busy; retry shortly']);
        return true;
      },
    );
    b.release(true);
    await assert.rejects(runs[1] as Promise<string>, { message: 'b failed' });
    await turn();
    assert.deepEqual(started, ['a', 'b', 'c'], 'the first waiting takes the freed slot');
    assert.deepEqual([slots.running, slots.waiting], [2, 1]);
    a.release();
    c.release();
    await turn();
    d.release();
    assert.deepEqual(await Promise.all([runs[0], runs[2], runs[3]]), ['a', 'c', 'd']);
    assert.deepEqual([slots.running, slots.waiting], [0, 0]);
  });
});
