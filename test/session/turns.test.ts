import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InstanceTurns } from '../../src/sessions/turns.ts';

/** A promise with its resolve and reject at hand. */
function deferred<T = void>() {
  let resolve: (value: T) => void = () => undefined;
  let reject: (error: Error) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * The per-instance queue of session lifecycle steps (src/sessions/turns.ts, docs/decisions/0016-session-lifecycle.md):
 * one instance's steps one after the other, a failed step not holding the next, other instances not waiting, and
 * nothing kept for an idle instance.
 */
describe('instance turns', () => {
  it("runs one instance's steps in order, each after the last settled, a rejected one included", async () => {
    const turns = new InstanceTurns();
    const log: string[] = [];
    const first = deferred();
    const a = turns.run('i1', async () => {
      log.push('first starts');
      await first.promise;
      log.push('first ends');
      throw new Error('first failed');
    });
    const b = turns.run('i1', async () => {
      log.push('second runs');
      return 2;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(log, ['first starts'], 'the second waits for the first');
    first.resolve();
    await assert.rejects(a, /first failed/);
    assert.equal(await b, 2);
    assert.deepEqual(log, ['first starts', 'first ends', 'second runs']);
  });

  it('does not make another instance wait, and forgets an instance once its last step settled', async () => {
    const turns = new InstanceTurns();
    const held = deferred();
    const slow = turns.run('i1', () => held.promise);
    assert.equal(await turns.run('i2', async () => 'i2 ran'), 'i2 ran', 'i2 does not wait for i1');
    // An entry goes a few microtasks after its step settled.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(turns.size, 1, 'i1 still has its step; i2 is forgotten');
    held.resolve();
    await slow;
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(turns.size, 0);
  });
});
