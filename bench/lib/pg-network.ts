import pg from 'pg';
import { type BenchChild, startChild } from './ipc.ts';

/** The network `--pg-delay` puts between parley and PostgreSQL (bench/roles/network.ts). */
export interface PgNetwork {
  /** The database URL through the proxy. */
  url: string;
  /** Each direction's delay, ms. */
  delayMs: number;
  /** A `select 1` round trip through the proxy and directly, ms (median of 200 after 20 to warm up). */
  roundTripMs: number;
  directRoundTripMs: number;
  /** Stops the proxy's process. */
  stop(): Promise<void>;
}

/** Median round trip of `select $1::int` on one connection to `url`, ms. */
async function roundTripMs(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (let i = 0; i < 20; i++) await client.query('select $1::int', [i]);
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      await client.query('select $1::int', [i]);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    return Math.round((times[times.length >> 1] ?? 0) * 100) / 100;
  } finally {
    await client.end();
  }
}

/**
 * Starts the delaying proxy in front of the server of `databaseUrl` and measures the round trip it makes.
 * @throws when the proxy cannot start or the server cannot be reached through it.
 */
export async function startPgNetwork(databaseUrl: string, delayMs: number): Promise<PgNetwork> {
  const direct = new URL(databaseUrl);
  const child: BenchChild = await startChild('network');
  try {
    const { port } = await child.call<{ port: number }>('start', {
      host: direct.hostname,
      port: Number(direct.port || 5432),
      delayMs,
    });
    const through = new URL(databaseUrl);
    through.hostname = '127.0.0.1';
    through.port = String(port);
    const url = through.toString();
    return {
      url,
      delayMs,
      roundTripMs: await roundTripMs(url),
      directRoundTripMs: await roundTripMs(databaseUrl),
      stop: () => child.stop(),
    };
  } catch (error) {
    await child.stop();
    throw error;
  }
}
