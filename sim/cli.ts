/**
 * `parley sim [--port N] [--json] [--log-level L] [--state-dir DIR] [--first-frame-delay MS]`: starts the platform simulator on 127.0.0.1 and runs until
 * SIGINT/SIGTERM. With `--json` the first stdout line is
 * `{"url":"ws://127.0.0.1:N/ws/chat","rootKey":"<hex>","control":"http://127.0.0.1:N/control","caFile":"<path>"}`;
 * otherwise the same facts are printed for a person. `caFile` is a PEM file, written at start in a fresh
 * temporary folder and removed at exit, holding the CA of the simulator's HTTPS media server (what parley
 * trusts through PLATFORM_CA_FILE).
 * With `--state-dir` the root key, accounts, devices and their keys are kept in DIR/state.json
 * (sim/model/state.ts), so a restart lets linked devices log in again. `--first-frame-delay` sets the minimum time
 * between a client's Noise finish and the server's first frame (SimulatorOptions.firstFrameDelayMs). Logs (pino, JSON lines) go to stderr so
 * stdout stays parseable.
 * bin/parley.js dispatches `sim` here; nothing in src/ imports the simulator.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import pino from 'pino';
import { DEFAULT_FIRST_FRAME_DELAY_MS } from './server/connection.ts';
import { startSimulator } from './simulator.ts';

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^[0-9]+$/.test(value) || port > 65535)
    throw new InvalidArgumentError('must be an integer from 0 to 65535');
  return port;
}

/** Largest `--first-frame-delay`, in milliseconds: a minute, past any round trip a client would wait out. */
const MAX_FIRST_FRAME_DELAY_MS = 60_000;

function parseDelay(value: string): number {
  const ms = Number(value);
  if (!/^[0-9]+$/.test(value) || ms > MAX_FIRST_FRAME_DELAY_MS)
    throw new InvalidArgumentError(`must be an integer from 0 to ${MAX_FIRST_FRAME_DELAY_MS} (milliseconds)`);
  return ms;
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Runs the command; resolves with the exit code once the simulator stopped (or failed to start). */
export async function main(argv: string[]): Promise<number> {
  const program = new Command('parley sim')
    .description('Start the platform simulator: an offline server the live engine pairs with and logs into')
    .option('--port <n>', 'TCP port on 127.0.0.1 (0 picks a free one)', parsePort, 0)
    .option('--json', 'print the connection facts as one JSON line first')
    .option('--log-level <level>', `log level on stderr (${LEVELS.join(', ')})`, 'info')
    .option('--state-dir <dir>', 'keep the root key, accounts and devices in this directory across restarts')
    .option(
      '--first-frame-delay <ms>',
      "minimum time between a client's Noise finish and the server's first frame, as a real round trip",
      parseDelay,
      DEFAULT_FIRST_FRAME_DELAY_MS,
    )
    .exitOverride();
  try {
    program.parse(argv, { from: 'user' });
  } catch (error) {
    return (error as { exitCode?: number }).exitCode ?? 2;
  }
  const options = program.opts<{
    port: number;
    json?: boolean;
    logLevel: string;
    stateDir?: string;
    firstFrameDelay: number;
  }>();
  if (!LEVELS.includes(options.logLevel)) {
    process.stderr.write(`error: option '--log-level <level>' must be one of ${LEVELS.join(', ')}\n`);
    return 2;
  }
  const log = pino({ level: options.logLevel, base: { service: 'parley-sim' } }, pino.destination(2));
  let sim: Awaited<ReturnType<typeof startSimulator>>;
  try {
    sim = await startSimulator({
      port: options.port,
      log,
      firstFrameDelayMs: options.firstFrameDelay,
      ...(options.stateDir === undefined ? {} : { stateDir: options.stateDir }),
    });
  } catch (error) {
    process.stderr.write(`error: cannot start the simulator: ${(error as Error).message}\n`);
    return 1;
  }
  const caDir = mkdtempSync(join(tmpdir(), 'parley-sim-'));
  const caFile = join(caDir, 'media-ca.pem');
  writeFileSync(caFile, sim.mediaCa);
  const facts = { url: sim.url, rootKey: sim.rootKey.toString('hex'), control: sim.control, caFile };
  if (options.json) process.stdout.write(`${JSON.stringify(facts)}\n`);
  else {
    process.stdout.write(
      `platform simulator listening\n  PLATFORM_URL=${facts.url}\n  PLATFORM_ROOT_KEY=${facts.rootKey}\n  PLATFORM_CA_FILE=${facts.caFile}\n  control API: ${facts.control}\n`,
    );
  }
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await sim.close();
  rmSync(caDir, { recursive: true, force: true });
  return 0;
}
