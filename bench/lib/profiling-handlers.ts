import { type ProfilingOptions, startProfiling, stopProfiling } from './inspector.ts';
import type { Handlers } from './ipc.ts';
import { startPromiseCount, stopPromiseCount } from './promise-count.ts';

/**
 * The profiling commands every role that can be profiled serves, for a window after its measured ones:
 * - `profileStart`: starts the CPU profiler, and the allocation sampler as `options` say (inspector.ts);
 * - `profileStop { file }`: stops them and writes the `.cpuprofile` to `file` (the `.heapprofile` beside it); → `file`;
 * - `promisesStart`: starts counting the promises the process creates (promise-count.ts);
 * - `promisesStop`: stops the count; → the promises created since `promisesStart`.
 */
export function profilingHandlers(options: ProfilingOptions = {}): Handlers {
  return {
    async profileStart() {
      await startProfiling(options);
      return null;
    },
    async profileStop(args: { file: string }) {
      return stopProfiling(args.file);
    },
    async promisesStart() {
      startPromiseCount();
      return null;
    },
    async promisesStop() {
      return stopPromiseCount();
    },
  };
}
