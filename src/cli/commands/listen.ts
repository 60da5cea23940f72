import type { Command } from 'commander';
import { loadConfig } from '../../config/config.ts';
import { CliError } from '../errors.ts';
import { examples } from '../examples.ts';
import { listen } from '../listen.ts';
import { listenStream } from '../listen-stream.ts';
import { type CliIo, integer, list } from './context.ts';

/** The `--port` option: 0 to 65535. @throws CliError `--port must be 0 to 65535`. */
function portNumber(value: string): number {
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) throw new CliError('--port must be 0 to 65535');
  return Number(value);
}

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve();
    };
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
}

/** The options of `parley listen` as commander parses them. */
interface ListenFlags {
  url: string;
  key?: string;
  from?: string;
  after?: number;
  types?: string;
  maxEvents?: number;
  webhook?: boolean;
  host?: string;
  port?: number;
  hmacKey?: string;
  caDir?: string;
  printCa?: boolean;
  json?: boolean;
}

/** The flags that belong to one mode only, and the name they are given as. */
const WEBHOOK_ONLY = [
  ['host', '--host'],
  ['port', '--port'],
  ['hmacKey', '--hmac-key'],
  ['caDir', '--ca-dir'],
] as const;
const STREAM_ONLY = [
  ['after', '--after'],
  ['types', '--types'],
  ['maxEvents', '--max-events'],
] as const;

/**
 * Adds `parley listen` to the command line (docs/cli.md "listen", docs/decisions/0033-listen-reads-the-stream.md):
 * by default it reads the instance's event stream with any key; `--webhook` runs the local HTTPS webhook receiver
 * instead, with a test key only.
 * @throws CliError (exit 1) for a missing `--key`, or a flag of the other mode (`--host applies to --webhook only`).
 */
export function registerListen(program: Command, io: CliIo): void {
  program
    .command('listen')
    .description(
      "prints each event of an instance as it is recorded, read from its event stream (any key with chat:webhook); --webhook: a local HTTPS webhook receiver set as a test instance's webhook instead",
    )
    .option('--url <url>', 'base URL of the running parley', 'http://localhost:8080')
    .option('--key <key>', 'an API key (svc_test_… or svc_live_…) with chat:webhook; --webhook: a test key')
    .option('--from <instance>', 'instance UUID or linked phone (default: the one parley picks for the key)')
    .option(
      '--after <sequence>',
      'print events after this sequence (default 0: from the oldest kept)',
      integer('--after'),
    )
    .option('--types <types>', 'only these event types, comma-separated (e.g. Message,ReadReceipt)')
    .option('--max-events <n>', 'exit 0 after printing this many events', integer('--max-events'))
    .option(
      '--webhook',
      'run a local HTTPS webhook receiver and set it as the instance webhook (test keys only)',
    )
    .option(
      '--host <address>',
      '--webhook: address to listen on, named in the webhook URL (default 127.0.0.1)',
    )
    .option('--port <port>', '--webhook: port to listen on (default 0: any free port)', portNumber)
    .option('--hmac-key <key>', '--webhook: HMAC key to set (default: 32 random bytes)')
    .option('--ca-dir <dir>', '--webhook: directory of the local CA (default: DATA_DIR)')
    .option('--print-ca', 'create the local CA if needed, print the path of its certificate and exit')
    .option('--json', 'one JSON object per event on stdout')
    .addHelpText('after', examples.listen)
    .action(async (opts: ListenFlags) => {
      if (opts.printCa) {
        const { ensureLocalCa } = await import('../listen-certificates.ts');
        io.out((await ensureLocalCa(opts.caDir ?? loadConfig(io.env).dataDir)).certPath);
        return;
      }
      const misplaced = opts.webhook
        ? STREAM_ONLY.find(([name]) => opts[name] !== undefined)
        : WEBHOOK_ONLY.find(([name]) => opts[name] !== undefined);
      if (misplaced !== undefined) {
        throw new CliError(
          opts.webhook
            ? `${misplaced[1]} applies to the event stream only (without --webhook)`
            : `${misplaced[1]} applies to --webhook only`,
        );
      }
      if (opts.key === undefined) {
        throw new CliError(
          opts.webhook
            ? '--key is required (a test key, svc_test_…)'
            : '--key is required (an API key with chat:webhook)',
        );
      }
      if (!opts.webhook) {
        if (opts.maxEvents === 0) throw new CliError('--max-events must be at least 1');
        await listenStream(
          {
            url: opts.url,
            key: opts.key,
            from: opts.from,
            after: opts.after ?? 0,
            types: list(opts.types),
            json: opts.json === true,
            maxEvents: opts.maxEvents,
          },
          io,
          untilSignal(),
        );
        return;
      }
      await listen(
        {
          url: opts.url,
          key: opts.key,
          ...(opts.from === undefined ? {} : { from: opts.from }),
          host: opts.host ?? '127.0.0.1',
          port: opts.port ?? 0,
          json: opts.json === true,
          ...(opts.hmacKey === undefined ? {} : { hmacKey: opts.hmacKey }),
          caDir: opts.caDir ?? loadConfig(io.env).dataDir,
        },
        io,
        untilSignal(),
      );
    });
}
