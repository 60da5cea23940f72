/**
 * Work deferred to the end of the event loop's turn, shared by the group writes and reads of the request path
 * (docs/benchmarks.md): what the requests of one poll phase ask for is collected, then run once in the check phase
 * (`setImmediate`), together.
 *
 * Several collectors chain: the instance lists are read for a turn's requests at its end (src/app/instance-lists.ts),
 * the requests go on with their instance, and the send jobs they then store (src/sends/group-insert.ts) are written
 * in the same turn's end rather than a turn later. Work queued while the turn end runs, by the callbacks or by the
 * promise jobs they start, runs once the promise-job queue has drained: a `process.nextTick` queued from a promise
 * job runs after the whole promise-job queue (Node's `processTicksAndRejections`). Work that goes on through ticks
 * of its own, or through I/O, can land after that point and then runs at the next turn's end, as it would have
 * without chaining. At most {@link MAX_CHAINED_PASSES} passes run in one turn end, so work that keeps queueing more
 * can never hold timers and I/O back.
 */

/** Passes of one turn end before what is still queued waits for the next turn (`setImmediate`). */
const MAX_CHAINED_PASSES = 8;

/** Callbacks waiting for the current or the next turn end. */
const waiting: (() => void)[] = [];
/** Whether a turn end is running (from its `setImmediate` until nothing more was queued). */
let running = false;
/** Passes the running turn end has made. */
let passes = 0;

/**
 * Runs `callback` at the end of this turn of the event loop, with everything else queued for it; during a turn end,
 * once what that turn end started has settled. `callback` should not throw: an exception is reported as a process
 * warning and the other callbacks still run.
 */
export function atTurnEnd(callback: () => void): void {
  waiting.push(callback);
  if (waiting.length === 1 && !running) setImmediate(startTurnEnd);
}

function startTurnEnd(): void {
  passes = 0;
  runTurnEnd();
}

function runTurnEnd(): void {
  running = true;
  passes += 1;
  const batch = waiting.splice(0);
  for (const callback of batch) {
    try {
      callback();
    } catch (error) {
      // Never the process's end: the callbacks are parley's own, and the rest of the turn's work must go on.
      process.emitWarning(error instanceof Error ? error : new Error(String(error)));
    }
  }
  // From a promise job, so the tick runs after every promise job the callbacks started has settled.
  queueMicrotask(() => process.nextTick(afterSettled));
}

function afterSettled(): void {
  if (waiting.length > 0 && passes < MAX_CHAINED_PASSES) {
    runTurnEnd();
    return;
  }
  running = false;
  if (waiting.length > 0) setImmediate(startTurnEnd);
}
