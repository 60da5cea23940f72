import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { allocationFileOf } from './profile.ts';

/**
 * In-process CPU and allocation profiling through the inspector protocol, so a profile covers only a measured window
 * (no start-up, no module loading) of the process it runs in. The CPU profile is a `.cpuprofile` and the sampled
 * allocations a `.heapprofile` beside it (both Chrome DevTools formats).
 */

let session: Session | undefined;

/**
 * Starts sampling this process's main thread every `intervalUs` microseconds (default 200), and its allocations about
 * once every 32 KiB allocated (V8's sampling heap profiler: objects still live and those collected since).
 */
export async function startProfiling(intervalUs = 200): Promise<void> {
  if (session) throw new Error('a profile is already running');
  const opened = new Session();
  opened.connect();
  await opened.post('Profiler.enable');
  await opened.post('Profiler.setSamplingInterval', { interval: intervalUs });
  await opened.post('Profiler.start');
  await opened.post('HeapProfiler.enable');
  await opened.post('HeapProfiler.startSampling', {
    samplingInterval: 32 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  session = opened;
}

/**
 * Stops sampling and writes the CPU profile to `file` and the allocation profile to `file` with `.heapprofile` in
 * place of its extension. @throws when no profile is running.
 */
export async function stopProfiling(file: string): Promise<string> {
  const opened = session;
  if (!opened) throw new Error('no profile is running');
  session = undefined;
  const { profile } = await opened.post('Profiler.stop');
  const { profile: allocations } = await opened.post('HeapProfiler.stopSampling');
  opened.disconnect();
  writeFileSync(file, JSON.stringify(profile));
  writeFileSync(allocationFileOf(file), JSON.stringify(allocations));
  return file;
}
