import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { allocationFileOf } from './profile.ts';

/**
 * In-process CPU and allocation profiling through the inspector protocol, so a profile covers only a measured window
 * (no start-up, no module loading) of the process it runs in. The CPU profile is a `.cpuprofile` and the sampled
 * allocations a `.heapprofile` beside it (both Chrome DevTools formats).
 */

let session: Session | undefined;

/** Options of {@link startProfiling}. */
export interface ProfilingOptions {
  /** CPU sampling interval, microseconds (default 200). */
  intervalUs?: number;
  /**
   * Also sample allocations, about once every 32 KiB allocated (V8's sampling heap profiler: objects still live and
   * those collected since). Default true; off where the profiled window is itself measured (the live inbound phase).
   */
  allocations?: boolean;
}

/**
 * Starts sampling this process's main thread, and its allocations unless told not to ({@link ProfilingOptions});
 * the allocations first, so the CPU profile does not count the allocation sampler's start.
 * @throws when a profile is already running, or when the inspector refuses to start (nothing is left running then).
 */
export async function startProfiling(options: ProfilingOptions = {}): Promise<void> {
  if (session) throw new Error('a profile is already running');
  const opened = new Session();
  opened.connect();
  try {
    // The allocation sampler first: starting it holds the main thread for a while (about 150 ms in a send run of 4
    // December), which the CPU profile would otherwise count as the measured window's work.
    if (options.allocations ?? true) {
      await opened.post('HeapProfiler.enable');
      await opened.post('HeapProfiler.startSampling', {
        samplingInterval: 32 * 1024,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
      sampling = true;
    }
    await opened.post('Profiler.enable');
    await opened.post('Profiler.setSamplingInterval', { interval: options.intervalUs ?? 200 });
    await opened.post('Profiler.start');
  } catch (error) {
    sampling = false;
    opened.disconnect();
    throw error;
  }
  session = opened;
}

/** Whether the running profile samples allocations. */
let sampling = false;

/**
 * Stops sampling and writes the CPU profile to `file` and, when allocations were sampled, the allocation profile to
 * `file` with `.heapprofile` in place of its extension. The allocation sampling stops first, so writing the CPU
 * profile out is not counted in it. → `file`. @throws when no profile is running.
 */
export async function stopProfiling(file: string): Promise<string> {
  const opened = session;
  if (!opened) throw new Error('no profile is running');
  session = undefined;
  try {
    if (sampling) {
      const { profile: allocations } = await opened.post('HeapProfiler.stopSampling');
      writeFileSync(allocationFileOf(file), JSON.stringify(allocations));
    }
    const { profile } = await opened.post('Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
  } finally {
    sampling = false;
    opened.disconnect();
  }
  return file;
}
