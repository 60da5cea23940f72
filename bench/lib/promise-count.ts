import { promiseHooks } from 'node:v8';

/**
 * Counts the promises this process creates over a window, through V8's promise hooks (`v8.promiseHooks.onInit`:
 * every promise, those of async functions and of `await` included). Used in profiled runs only: the hook itself
 * costs each promise a call. docs/benchmarks.md step 96 read a send's promises this way.
 */

let stopHook: (() => void) | undefined;
let created = 0;

/** Starts counting from zero. @throws Error when a count is already running. */
export function startPromiseCount(): void {
  if (stopHook) throw new Error('a promise count is already running');
  created = 0;
  // Node types the hook's remover as a bare `Function`.
  const remove = promiseHooks.onInit(() => {
    created += 1;
  });
  stopHook = () => {
    remove();
  };
}

/** Stops counting. → the promises created since {@link startPromiseCount}. @throws Error when none is running. */
export function stopPromiseCount(): number {
  if (!stopHook) throw new Error('no promise count is running');
  stopHook();
  stopHook = undefined;
  return created;
}
