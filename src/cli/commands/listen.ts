import type { Command } from 'commander';
import { loadConfig } from '../../config/config.ts';
import { CliError } from '../errors.ts';
import { examples } from '../examples.ts';
import { listen } from '../listen.ts';
import type { CliIo } from './context.ts';

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

/** Adds `parley listen` to the command line. */
export function registerListen(program: Command, io: CliIo): void {
  program
    .command('listen')
    .description(
      'local HTTPS webhook receiver: sets itself as the webhook of a test instance, verifies both signatures and prints each event',
    )
    .option('--url <url>', 'base URL of the running parley', 'http://localhost:8080')
    .option('--key <key>', 'a test key (svc_test_…) with chat:webhook and chat:session')
    .option('--from <instance>', 'instance UUID or linked phone (default: the one parley picks for the key)')
    .option('--host <address>', 'address to listen on, named in the webhook URL', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0: any free port)', portNumber, 0)
    .option('--hmac-key <key>', 'HMAC key to set (default: 32 random bytes)')
    .option('--ca-dir <dir>', 'directory of the local CA (default: DATA_DIR)')
    .option('--print-ca', 'create the local CA if needed, print the path of its certificate and exit')
    .option('--json', 'one JSON object per event on stdout')
    .addHelpText('after', examples.listen)
    .action(
      async (opts: {
        url: string;
        key?: string;
        from?: string;
        host: string;
        port: number;
        hmacKey?: string;
        caDir?: string;
        printCa?: boolean;
        json?: boolean;
      }) => {
        const caDir = opts.caDir ?? loadConfig(io.env).dataDir;
        if (opts.printCa) {
          const { ensureLocalCa } = await import('../listen-certificates.ts');
          io.out((await ensureLocalCa(caDir)).certPath);
          return;
        }
        if (opts.key === undefined) throw new CliError('--key is required (a test key, svc_test_…)');
        await listen(
          {
            url: opts.url,
            key: opts.key,
            ...(opts.from === undefined ? {} : { from: opts.from }),
            host: opts.host,
            port: opts.port,
            json: opts.json === true,
            ...(opts.hmacKey === undefined ? {} : { hmacKey: opts.hmacKey }),
            caDir,
          },
          io,
          untilSignal(),
        );
      },
    );
}
