/**
 * The holds of this process's relays on send jobs (src/sends/runners.ts `RelayHolds`, `Runners.release`): a job a
 * hand-back passed over while a relay held it, and that relay let go unwritten, is handed back once its last hold is
 * given back, by another hand-back asked for at once, and only while this process still holds the instance's session
 * (docs/decisions/0009-sends-as-jobs.md).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Runners } from '../../src/sends/runners.ts';

const INSTANCE = 'instance-1';

/** Runners on a fixed clock whose session is held while `held.now`, with the wakes they asked for. */
function runnersWith(held: { now: boolean }) {
  const wakes: string[] = [];
  const runners = new Runners(
    () => 0,
    (instanceId) => wakes.push(instanceId),
    () => held.now,
  );
  const runner = runners.get(INSTANCE);
  // The queue handed back once since it took the instance.
  runner.reclaimed = true;
  runner.idle = true;
  return { runners, runner, wakes };
}

describe('send queue: relay holds a hand-back passed over', () => {
  it('asks for another hand-back and wakes the queue when the last hold on a passed-over job is given back', () => {
    const { runners, runner, wakes } = runnersWith({ now: true });
    runner.relaying.hold('job-1');
    runner.relaying.hold('job-1');
    runner.relaying.hold('job-2');
    assert.deepEqual(runner.relaying.passOver(), ['job-1', 'job-2']);
    runner.relaying.leave('job-1');
    runners.release(INSTANCE, runner, 'job-1');
    assert.deepEqual(
      [runner.reclaimed, runner.handBacksAsked, wakes],
      [true, 0, []],
      'one hold on it is left: nothing asked',
    );
    runners.release(INSTANCE, runner, 'job-1');
    assert.deepEqual(
      [runner.reclaimed, runner.handBacksAsked, runner.idle, wakes],
      [false, 1, false, [INSTANCE]],
    );
    assert.deepEqual(runner.relaying.ids(), ['job-2']);
  });

  it('asks for nothing for a job its relay wrote, nor when no hand-back ran while it was held, nor for a hold taken after one', () => {
    const { runners, runner, wakes } = runnersWith({ now: true });
    runner.relaying.hold('job-0');
    runner.relaying.passOver();
    runners.release(INSTANCE, runner, 'job-0');
    assert.deepEqual([runner.reclaimed, runner.handBacksAsked, wakes], [true, 0, []]);
    runner.relaying.hold('job-1');
    runner.relaying.leave('job-1');
    runners.release(INSTANCE, runner, 'job-1');
    assert.deepEqual(
      [runner.reclaimed, runner.handBacksAsked, wakes, runner.relaying.size],
      [true, 0, [], 0],
    );
    // A hand-back passes job-2 over; job-3 is held only after it.
    runner.relaying.hold('job-2');
    runner.relaying.passOver();
    runner.relaying.hold('job-3');
    runner.relaying.leave('job-3');
    runners.release(INSTANCE, runner, 'job-3');
    assert.deepEqual([runner.reclaimed, runner.handBacksAsked, wakes], [true, 0, []]);
  });

  it('asks for nothing once this process no longer holds the instance: the new holder may be relaying the job', () => {
    const held = { now: true };
    const { runners, runner, wakes } = runnersWith(held);
    runner.relaying.hold('job-1');
    runner.relaying.passOver();
    runner.relaying.leave('job-1');
    held.now = false;
    runners.release(INSTANCE, runner, 'job-1');
    assert.deepEqual(
      [runner.reclaimed, runner.handBacksAsked, wakes, runner.relaying.size],
      [true, 0, [], 0],
    );
  });
});
