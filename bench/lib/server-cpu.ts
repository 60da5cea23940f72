import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';

/**
 * Clock ticks per second of the CPU times in `/proc/<pid>/stat` (Linux's `USER_HZ`, which the kernel's interface
 * to user space fixes at 100 on the architectures Node runs on; proc(5), "/proc/pid/stat").
 */
const USER_HZ = 100;

/** The CPU time a PostgreSQL server has used, read from `/proc`. */
export interface ServerCpu {
  /**
   * CPU time (user and system) the server's processes have used so far, ms: the postmaster's own, its live
   * children's (backends, the WAL writer, the checkpointer, autovacuum) and its exited children's, which the
   * kernel adds to the postmaster's `cutime`/`cstime` once reaped. Only differences between two reads mean
   * anything. @throws when `/proc` no longer has the postmaster (the server stopped).
   */
  read(): number;
}

/** The fields after the command name of `/proc/<pid>/stat` (the name may hold spaces and parentheses). */
function statFields(pid: number | string): string[] {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/** Field `index` (1-based, as proc(5) numbers them) of `fields` as a number; fields start at 3 (state). */
function field(fields: readonly string[], index: number): number {
  return Number(fields[index - 3] ?? 0);
}

/** The parent of process `backend` when `/proc` shows it and it is named `postgres`; else undefined. */
function postmasterOf(backend: number): number | undefined {
  try {
    const parent = field(statFields(backend), 4);
    return readFileSync(`/proc/${parent}/comm`, 'utf8').trim() === 'postgres' ? parent : undefined;
  } catch {
    return undefined; // not a process of this machine, or no Linux `/proc`
  }
}

/**
 * Finds the PostgreSQL server behind `databaseUrl` among this machine's processes: the parent of the backend that
 * serves a fresh connection (`pg_backend_pid()`), when `/proc` shows it and it is named `postgres`.
 * @returns a reader of the server's CPU time, or undefined when the server does not run on this machine (or
 *   `/proc` is not Linux's): the benchmark then prints no server figures.
 * @throws when the server cannot be reached.
 */
export async function openServerCpu(databaseUrl: string): Promise<ServerCpu | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  let postmaster: number | undefined;
  try {
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    // Read while the connection holds its backend: it exits once the client ends.
    postmaster = postmasterOf(Number(rows[0]?.pid));
  } finally {
    await client.end();
  }
  if (postmaster === undefined) return undefined;
  const pid = postmaster;
  return {
    read() {
      const own = statFields(pid);
      let ticks = field(own, 14) + field(own, 15) + field(own, 16) + field(own, 17);
      for (const entry of readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) continue;
        let fields: string[];
        try {
          fields = statFields(entry);
        } catch {
          continue; // exited between the listing and the read: its time is in the postmaster's cutime now
        }
        if (field(fields, 4) === pid) ticks += field(fields, 14) + field(fields, 15);
      }
      return (ticks * 1000) / USER_HZ;
    },
  };
}

/**
 * {@link openServerCpu} for a scenario's store: the server of `databaseUrl` on PostgreSQL, none on SQLite (or
 * without a URL). @throws when the PostgreSQL server cannot be reached.
 */
export function serverCpuOf(store: {
  dialect: 'sqlite' | 'postgres';
  databaseUrl?: string | undefined;
}): Promise<ServerCpu | undefined> {
  return store.dialect === 'postgres' && store.databaseUrl !== undefined
    ? openServerCpu(store.databaseUrl)
    : Promise.resolve(undefined);
}
