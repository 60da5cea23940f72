import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

/**
 * In-process CPU profiling through the inspector protocol, so a profile covers only a measured window (no
 * start-up, no module loading) of the process it runs in. The file is a `.cpuprofile` (Chrome DevTools format).
 */

let session: Session | undefined;

/** Starts sampling this process's main thread every `intervalUs` microseconds (default 200). */
export async function startProfiling(intervalUs = 200): Promise<void> {
  if (session) throw new Error('a profile is already running');
  const opened = new Session();
  opened.connect();
  await opened.post('Profiler.enable');
  await opened.post('Profiler.setSamplingInterval', { interval: intervalUs });
  await opened.post('Profiler.start');
  session = opened;
}

/** Stops sampling and writes the profile to `file`. @throws when no profile is running. */
export async function stopProfiling(file: string): Promise<string> {
  const opened = session;
  if (!opened) throw new Error('no profile is running');
  session = undefined;
  const { profile } = await opened.post('Profiler.stop');
  opened.disconnect();
  writeFileSync(file, JSON.stringify(profile));
  return file;
}
