import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eitherSignal, type WaitSignal, Withdrawal } from '../../src/domain/withdrawal.ts';
import { SendWaiters } from '../../src/sends/waiters.ts';

const JOB = { instanceId: 'i1', id: '3EB0WITHDRAWN0000000001' };

describe('a wait withdrawn when its caller leaves (src/domain/withdrawal.ts)', () => {
  it('calls each listener once, in order, with the reason set; a listener added after the end is never called', () => {
    const gone = new Withdrawal();
    const calls: string[] = [];
    assert.equal(gone.aborted, false);
    assert.equal(gone.reason, undefined);
    gone.addEventListener('abort', () => calls.push(`first:${String(gone.reason)}`), { once: true });
    gone.addEventListener('abort', () => calls.push(`second:${gone.aborted}`), { once: true });
    gone.withdraw('left');
    gone.withdraw('left again');
    gone.addEventListener('abort', () => calls.push('late'), { once: true });
    assert.deepEqual(calls, ['first:left', 'second:true']);
    assert.equal(gone.aborted, true);
    assert.equal(gone.reason, 'left', 'the first reason stays');
  });

  it('a listener that throws does not stop the others; its error is thrown once all ran', () => {
    const gone = new Withdrawal();
    const calls: number[] = [];
    gone.addEventListener('abort', () => calls.push(1), { once: true });
    gone.addEventListener(
      'abort',
      () => {
        throw new Error('listener failed');
      },
      { once: true },
    );
    gone.addEventListener('abort', () => calls.push(3), { once: true });
    assert.throws(() => gone.withdraw('left'), /listener failed/);
    assert.deepEqual(calls, [1, 3]);
    assert.equal(gone.aborted, true);
  });

  it('a listener taken off before the end is not called; the others are, and taking off an unknown one does nothing', () => {
    const deadline = new Withdrawal();
    const calls: string[] = [];
    const first = () => calls.push('first');
    const second = () => calls.push('second');
    const third = () => calls.push('third');
    deadline.addEventListener('abort', first, { once: true });
    deadline.addEventListener('abort', second, { once: true });
    deadline.addEventListener('abort', third, { once: true });
    deadline.removeEventListener('abort', second);
    deadline.removeEventListener('abort', () => calls.push('never added'));
    deadline.withdraw('timed out');
    assert.deepEqual(calls, ['first', 'third']);

    const alone = new Withdrawal();
    alone.addEventListener('abort', first, { once: true });
    alone.removeEventListener('abort', first);
    alone.withdraw('timed out');
    alone.removeEventListener('abort', first);
    assert.deepEqual(calls, ['first', 'third'], 'the only listener, taken off');
  });

  it('eitherSignal aborts with the reason of whichever aborts first, or at once when one already has', () => {
    const first = new Withdrawal();
    const second = new AbortController();
    const either = eitherSignal(first, second.signal);
    assert.equal(either.aborted, false);
    second.abort('the second left');
    first.withdraw('the first left');
    assert.equal(either.aborted, true);
    assert.equal(either.reason, 'the second left');

    const ended = new Withdrawal();
    ended.withdraw('already gone');
    const already = eitherSignal(new Withdrawal(), ended);
    assert.equal(already.aborted, true);
    assert.equal(already.reason, 'already gone');
  });

  it("withdraws a send's wait as an AbortSignal does: the wait rejects with the reason and leaves nothing behind", async () => {
    for (const make of [
      () => {
        const gone = new Withdrawal();
        return { signal: gone as WaitSignal, leave: (reason: Error) => gone.withdraw(reason) };
      },
      () => {
        const controller = new AbortController();
        return {
          signal: controller.signal as WaitSignal,
          leave: (reason: Error) => controller.abort(reason),
        };
      },
    ]) {
      const waiters = new SendWaiters();
      const { signal, leave } = make();
      const kept = waiters.await(JOB);
      const left = waiters.await(JOB, signal);
      const reason = new Error('the client closed its connection before the answer');
      leave(reason);
      await assert.rejects(left, (error: unknown) => error === reason);
      assert.equal(waiters.has(JOB), true, 'the other wait is kept');
      waiters.settle(JOB, { id: JOB.id, timestamp: 1 });
      assert.deepEqual(await kept, { id: JOB.id, timestamp: 1 });
      assert.equal(waiters.has(JOB), false);
      // A signal that had aborted before the wait rejects it at once.
      await assert.rejects(waiters.await(JOB, signal), (error: unknown) => error === reason);
      assert.equal(waiters.has(JOB), false);
    }
  });
});
