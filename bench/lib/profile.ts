import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { round } from './stats.ts';

/**
 * Summaries of V8 CPU profiles (`node --cpu-prof`, the `.cpuprofile` JSON format of the Chrome DevTools
 * protocol): self time per function and per source area, and total (inclusive) time per function, so the
 * report can name the largest cost of a path; and of the sampled allocations written beside them
 * (`.heapprofile`, V8's sampling heap profiler): bytes allocated in all and by function.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** One row of a profile summary: a function or an area, with its share of the sampled time. */
export interface ProfileEntry {
  name: string;
  /** Milliseconds. */
  ms: number;
  /** Percent of all sampled time (idle included). */
  percent: number;
}

/** One row of an allocation summary: a function, with the bytes sampled in it (allocated by its own code). */
export interface AllocationEntry {
  name: string;
  /** Bytes, in millions (MB). */
  mb: number;
  /** Percent of all bytes sampled. */
  percent: number;
}

/** What a `.heapprofile` sampled: every byte allocated over the profiled window, collected since or not. */
export interface AllocationSummary {
  file: string;
  /** Bytes allocated over the window, estimated from the samples. */
  totalBytes: number;
  /** Bytes by the function that allocated them, largest first. */
  selfTop: AllocationEntry[];
}

/** Self and inclusive time of a profile, largest first. */
export interface ProfileSummary {
  file: string;
  /** Sampled time, milliseconds, without the profiler's own ({@link ProfileSummary.profilerMs}). */
  totalMs: number;
  /**
   * Milliseconds sampled inside the inspector's own calls (`node:inspector`: stopping the allocation sampler, which
   * builds its profile on the main thread), left out of every figure here: they are the profiler's, not the code's.
   */
  profilerMs: number;
  /** Share of sampled time the process was idle (waiting for I/O), percent. */
  idlePercent: number;
  /** Self time by source area (`sqlite (native)`, `node_modules/kysely`, `src/store`, …). */
  byArea: ProfileEntry[];
  /** Self time by function. */
  selfTop: ProfileEntry[];
  /** Inclusive time by function (the function and everything it called). */
  totalTop: ProfileEntry[];
  /** The allocations sampled over the same window, when a `.heapprofile` lies beside the `.cpuprofile`. */
  allocations?: AllocationSummary;
}

interface HeapProfileNode {
  callFrame: CallFrame;
  selfSize: number;
  children: HeapProfileNode[];
}

/** The `.heapprofile` written beside the `.cpuprofile` `file` (bench/lib/inspector.ts names it so). */
export function allocationFileOf(file: string): string {
  return `${file.replace(/\.[^./]*$/, '')}.heapprofile`;
}

/** Summarises one `.heapprofile` file (`limit` functions). */
export function summariseAllocations(file: string, limit = 15): AllocationSummary {
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapProfileNode };
  const byFunction = new Map<string, number>();
  let totalBytes = 0;
  const stack = [head];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    totalBytes += node.selfSize;
    if (node.selfSize > 0) {
      const name = label(node.callFrame);
      byFunction.set(name, (byFunction.get(name) ?? 0) + node.selfSize);
    }
    stack.push(...node.children);
  }
  const selfTop = [...byFunction.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, bytes]) => ({
      name,
      mb: round(bytes / 1e6, 1),
      percent: round((bytes / totalBytes) * 100, 1),
    }));
  return { file, totalBytes, selfTop };
}

/** The area a frame belongs to: a package, a folder of parley's source, a Node internal, or a V8 category. */
export function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return 'garbage collection';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(program)') return 'V8/native (program)';
    return `native: ${functionName || '(anonymous)'}`;
  }
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + 'node_modules/'.length).split('/');
    const name = rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
    return `node_modules/${name}`;
  }
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  const src = url.indexOf('/src/');
  if (src >= 0) {
    const parts = url.slice(src + 1).split('/');
    return parts.length > 2 ? parts.slice(0, 2).join('/') : (parts[0] ?? url);
  }
  return url;
}

function label(frame: CallFrame): string {
  const file = frame.url.replace(/^.*\/(node_modules\/|src\/|bench\/)/, '$1');
  return `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
}

function top(map: Map<string, number>, totalMs: number, limit: number): ProfileEntry[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, us]) => ({ name, ms: round(us / 1000, 1), percent: round((us / 1000 / totalMs) * 100, 1) }));
}

/** The ids of the nodes at or under a frame of the inspector's own module (`node:inspector`). */
function profilerNodes(
  nodes: readonly ProfileNode[],
  parent: ReadonlyMap<number, number>,
  byId: ReadonlyMap<number, ProfileNode>,
): Set<number> {
  const inside = new Set<number>();
  for (const node of nodes) {
    let cursor: number | undefined = node.id;
    while (cursor !== undefined) {
      if (byId.get(cursor)?.callFrame.url === 'node:inspector') {
        inside.add(node.id);
        break;
      }
      cursor = parent.get(cursor);
    }
  }
  return inside;
}

/**
 * Summarises one `.cpuprofile` file (`limit` rows per list); samples inside the inspector's own calls are left out
 * and counted in `profilerMs`.
 */
export function summariseProfile(file: string, limit = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const profiler = profilerNodes(profile.nodes, parent, byId);
  const selfUs = new Map<number, number>();
  let profilerUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i] ?? 0;
    const us = profile.timeDeltas[i] ?? 0;
    if (profiler.has(id)) profilerUs += us;
    else selfUs.set(id, (selfUs.get(id) ?? 0) + us);
  }
  const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const areas = new Map<string, number>();
  const selfFn = new Map<string, number>();
  const totalFn = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    const area = areaOf(node.callFrame);
    areas.set(area, (areas.get(area) ?? 0) + us);
    selfFn.set(label(node.callFrame), (selfFn.get(label(node.callFrame)) ?? 0) + us);
    // Inclusive time: every distinct function on the stack of this sample gets the sample once.
    const seen = new Set<string>();
    let cursor: number | undefined = id;
    while (cursor !== undefined) {
      const frame = byId.get(cursor)?.callFrame;
      if (frame && frame.url !== '') {
        const name = label(frame);
        if (!seen.has(name)) {
          seen.add(name);
          totalFn.set(name, (totalFn.get(name) ?? 0) + us);
        }
      }
      cursor = parent.get(cursor);
    }
  }
  const totalMs = totalUs / 1000;
  const allocations = allocationFileOf(file);
  return {
    file,
    totalMs: round(totalMs, 0),
    profilerMs: round(profilerUs / 1000, 0),
    idlePercent: round(((areas.get('idle') ?? 0) / 1000 / totalMs) * 100, 1),
    byArea: top(areas, totalMs, limit),
    selfTop: top(selfFn, totalMs, limit),
    totalTop: top(totalFn, totalMs, limit),
    ...(existsSync(allocations) ? { allocations: summariseAllocations(allocations, limit) } : {}),
  };
}

/** The newest `.cpuprofile` in `dir`, or undefined. */
export function newestProfile(dir: string): string | undefined {
  const files = readdirSync(dir)
    .filter((name) => name.endsWith('.cpuprofile'))
    .sort();
  const last = files.at(-1);
  return last === undefined ? undefined : join(dir, last);
}
