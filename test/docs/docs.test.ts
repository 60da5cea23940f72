/**
 * Executable docs: every ```sh block of README.md and docs/*.md runs verbatim against a real parley, so a page
 * that drifts from the code fails the suite.
 *
 * How a page runs:
 * - Each page gets a fresh server started as `npm start` starts it (`node bin/parley.js serve`, a child process)
 *   on 127.0.0.1, a free port and a fresh DATA_DIR, with the settings the README gives for `parley listen`
 *   (WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32, OUTBOUND_CA_FILE=DATA_DIR/listen-ca.pem). The first-boot key is read from
 *   its banner. This machine has no DNS: example.com names resolve to example.com's address (./example-dns.mjs),
 *   which cannot be reached from here, as a reader's endpoint that is down.
 * - The page's ```sh blocks run in order in one bash (`set -euo pipefail`) in the project root, with DATA_DIR set
 *   to the server's (what a reader in the project folder has by default), so variables carry from block to block.
 *   Any other fence (```text, ```json, ```js, ```http) is shown only, never run: use one for what cannot run here
 *   (installing, starting the server, a real phone, long benchmarks).
 * - The only edits: a line assigning a page variable, `PARLEY=…` (the base URL) or `KEY=…` (the key), with or
 *   without `export`, gets the test server's value; the rest of the line (a comment) stays. A value computed by a
 *   command (`KEY=$(npx parley key create …)`) is the page's own and runs as written.
 * - A page that needs the platform simulator says so in an HTML comment, `<!-- docs-test: simulator -->`. The test
 *   then starts `parley sim --json` first and the server with PLATFORM_URL / PLATFORM_ROOT_KEY / PLATFORM_CA_FILE
 *   from its first line (as such a page tells the reader to, in ```text blocks), and `SIM=…` (the control API's
 *   base URL), `PLATFORM_URL=…`, `PLATFORM_ROOT_KEY=…` and `PLATFORM_CA_FILE=…` assignments get the simulator's
 *   values.
 * - A page that publishes to RabbitMQ and NATS JetStream says `<!-- docs-test: brokers -->`. It runs only where
 *   TEST_AMQP_URL and TEST_NATS_URL name the brokers (as CI sets them, and as test/brokers does); elsewhere its test
 *   is not defined at all and scripts/test.js prints a `not run:` line for it. `AMQP_URL=…` and `NATS_URL=…`
 *   assignments get those values. The server allows only 127.0.0.1 as a private address, so both must be this
 *   machine's.
 *
 * What is asserted (the convention for `# →` lines):
 * - Every command exits 0 (a failing command stops the page and fails the test, naming block and command).
 * - A block is cut into steps after each run of `# → …` lines (a `# →` may also end a command line). The output of
 *   a step must contain, for each of its `# →` lines, a line that matches it: `…` (or `...`) stands for any text,
 *   everything else is compared literally (runs of spaces compare equal). So a page shows the stable fields
 *   exactly — `"success":true,"code":200`, `"details":"Sent"`, an error's code and message — and elides ids,
 *   times and keys with `…`.
 * - A step whose output holds parley's error envelope (`{"error":{`) fails unless one of its `# →` lines shows an
 *   error: an example that silently answers 4xx is a broken example.
 * - ```sh background: the block starts in the background (e.g. `parley listen`); the page goes on once its first
 *   `# →` line appears in the block's output. Its other `# →` lines must appear once the next block has run (the
 *   one that makes them happen), before the page goes on. The block is stopped (SIGTERM to its process group) at
 *   the end of the page.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { AMQP_URL, brokersConfigured, NATS_URL } from '../support/brokers.ts';
import {
  cleanEnv,
  type ParleyProcess,
  ROOT,
  type SimulatorProcess,
  startParley,
  startSimulatorProcess,
} from '../support/parley-process.ts';
import {
  expectation,
  fencedBlocks,
  hasLine,
  pageOptions,
  pages,
  pagesToRun,
  stepsOf,
  withServerVariables,
} from './doc-pages.ts';
import { eventually, Shell } from './doc-shell.ts';

/**
 * Commands a docs block must never run here: they install (npm ci replaces node_modules), start a second server,
 * or run this very suite. A page shows them in a ```text block.
 */
const NOT_HERE = /\bnpm\s+(ci|install|i|start|test|run\s+bench)\b|\bparley(\.js)?\s+serve\b|\.ci\/run\b/;

/**
 * Runs every ```sh block of `page` against `parley` (and `sim`, the simulator it is pointed at, for a page that
 * asks for one; the brokers' URLs for a page that asks for them).
 */
async function runPage(
  page: string,
  parley: ParleyProcess,
  sim: SimulatorProcess | undefined,
  brokers: boolean,
): Promise<void> {
  const blocks = fencedBlocks(readFileSync(join(ROOT, page), 'utf8')).filter((b) => b.lang === 'sh');
  for (const block of blocks) {
    const uncommented = block.code.replace(/(^|\s)#.*$/gm, '');
    assert.doesNotMatch(
      uncommented,
      NOT_HERE,
      `${page}:${block.line}: this block cannot run here; fence it as text`,
    );
  }
  const workDir = mkdtempSync(join(tmpdir(), 'parley-docs-bg-'));
  const shell = new Shell({ ...cleanEnv(), DATA_DIR: parley.dataDir, LOG_LEVEL: 'silent' });
  const background: { file: string; pid: number; pending: RegExp[]; line: number }[] = [];
  const variables: Record<string, string> = {
    PARLEY: parley.url,
    KEY: parley.key,
    ...(sim
      ? {
          SIM: sim.control,
          PLATFORM_URL: sim.url,
          PLATFORM_ROOT_KEY: sim.rootKey,
          PLATFORM_CA_FILE: sim.caFile,
        }
      : {}),
    ...(brokers ? { AMQP_URL, NATS_URL } : {}),
  };
  try {
    for (const [index, block] of blocks.entries()) {
      const where = `${page}:${block.line} (block ${index + 1})`;
      if (block.attributes.includes('background')) {
        const steps = stepsOf(block);
        const [first, ...rest] = steps.flatMap((s) => s.expected.map(expectation));
        assert.ok(first, `${where}: a background block needs a # → line to wait for`);
        const file = join(workDir, `block-${index}.out`);
        const code = withServerVariables(block.code, variables);
        const out = await shell.run(`{\n${code}\n} >'${file}' 2>&1 &\necho "@@pid $!"`);
        const pid = Number(/@@pid (\d+)/.exec(out)?.[1]);
        const read = () => {
          try {
            return readFileSync(file, 'utf8');
          } catch {
            return '';
          }
        };
        await eventually(read, first, `${where}: ${first}`);
        background.push({ file, pid, pending: rest, line: block.line });
        continue;
      }
      for (const step of stepsOf(block)) {
        const code = withServerVariables(step.code, variables);
        let output: string;
        try {
          output = await shell.run(code);
        } catch (error) {
          assert.fail(`${page}:${step.line}: the command failed:\n${step.code}\n${(error as Error).message}`);
        }
        for (const text of step.expected) {
          assert.ok(
            hasLine(output, expectation(text)),
            `${page}:${step.line}: the output does not show\n  # → ${text}\ncommands:\n${step.code}\noutput:\n${output}`,
          );
        }
        if (output.includes('{"error":{') && !step.expected.some((text) => text.includes('"error"'))) {
          assert.fail(`${page}:${step.line}: parley answered an error:\n${step.code}\noutput:\n${output}`);
        }
      }
      for (const job of background) {
        for (const pattern of job.pending.splice(0)) {
          await eventually(() => readFileSync(job.file, 'utf8'), pattern, `${page}:${job.line}: ${pattern}`);
        }
      }
    }
  } finally {
    for (const job of background) {
      try {
        process.kill(-job.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    await shell.close();
    rmSync(workDir, { recursive: true, force: true });
  }
}

/** Commands the examples use; without one of them the pages are not run (scripts/test.js says so). */
const TOOLS = ['bash', 'curl', 'openssl', 'base64'];
const toolsPresent = TOOLS.every(
  (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0,
);

// Two pages at a time: each has its own server, data directory and simulator, and spends most of its time starting
// processes (`npx parley …`), so the 2-core machine runs two about as fast as one.
describe('the docs run as written (README.md, docs/*.md)', { concurrency: 2 }, () => {
  for (const page of toolsPresent ? pagesToRun() : []) {
    const markdown = readFileSync(join(ROOT, page), 'utf8');
    const runnable = fencedBlocks(markdown).filter((b) => b.lang === 'sh');
    if (runnable.length === 0) continue;
    const options = pageOptions(markdown);
    // without the brokers the page's test is not defined (scripts/test.js says it is not run)
    if (options.has('brokers') && !brokersConfigured()) continue;
    // a page runs tens of commands, each `npx parley …` a process of its own: more than the default per-test time
    it(`${page}: every sh block runs against a fresh server and shows what the page says`, {
      timeout: 300_000,
    }, async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'parley-docs-'));
      const ca = spawnSync(process.execPath, ['bin/parley.js', 'listen', '--print-ca'], {
        cwd: ROOT,
        env: { ...cleanEnv(), DATA_DIR: dataDir },
        encoding: 'utf8',
      });
      assert.equal(ca.status, 0, ca.stderr);
      const sim = options.has('simulator') ? await startSimulatorProcess() : undefined;
      try {
        const parley = await startParley(
          {
            WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
            OUTBOUND_CA_FILE: ca.stdout.trim(),
            NODE_OPTIONS: `--import=${join(ROOT, 'test/docs/example-dns.mjs')}`,
            ...(sim
              ? { PLATFORM_URL: sim.url, PLATFORM_ROOT_KEY: sim.rootKey, PLATFORM_CA_FILE: sim.caFile }
              : {}),
          },
          dataDir,
        );
        try {
          await runPage(page, parley, sim, options.has('brokers'));
        } finally {
          await parley.stop();
        }
      } finally {
        await sim?.stop();
      }
    });
  }

  it('link nothing outside the repository and cite no internal notes', () => {
    for (const page of pages()) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      const quote = (pattern: RegExp) => text.split('\n').find((line) => pattern.test(line));
      for (const [, target = ''] of text.matchAll(/\]\(([^)#\s]+)[^)]*\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue;
        const resolved = resolve(ROOT, dirname(page), target);
        assert.ok(resolved.startsWith(`${ROOT}/`), `${page} links outside the repository: ${target}`);
      }
      for (const [pattern, what] of [
        [/\b(SP[E]C|DES[I]GN)(\.md)?\b/, 'cites notes kept outside the repository'],
        [/\bD(1[0-7]|[1-9])\b/, 'cites a design note (Dn)'],
      ] as const) {
        assert.equal(quote(pattern), undefined, `${page} ${what}`);
      }
    }
  });

  it('parses fences, steps and expectations as the convention says', () => {
    const page = [
      '```sh',
      'A=1',
      'curl x # → {"a":…}',
      '# → second',
      'echo b',
      '```',
      '````text',
      '```',
      '````',
    ];
    const [block, text] = fencedBlocks(page.join('\n'));
    assert.equal(block?.lang, 'sh');
    assert.equal(text?.lang, 'text');
    assert.ok(block);
    assert.deepEqual(
      stepsOf(block).map((s) => [s.code, s.expected]),
      [
        ['A=1\ncurl x # → {"a":…}', ['{"a":…}', 'second']],
        ['echo b', []],
      ],
    );
    assert.ok(expectation('{"a":…,"b":2}').test('{"a":"x y","b":2}'));
    assert.ok(!expectation('{"a":…,"b":2}').test('{"a":"x","b":3}'));
    assert.equal(
      withServerVariables('export KEY=svc_test_...   # the key\nPARLEY=http://localhost:8080\nX=1', {
        KEY: 'k',
        PARLEY: 'u',
      }),
      "export KEY='k'   # the key\nPARLEY='u'\nX=1",
    );
    assert.equal(
      withServerVariables('KEY=$(npx parley key create)\nKEY="$(cat key)"\nSIM=http://x # the control', {
        KEY: 'k',
        SIM: 's',
      }),
      'KEY=$(npx parley key create)\nKEY="$(cat key)"\nSIM=\'s\' # the control',
    );
    assert.deepEqual([...pageOptions('<!-- docs-test: simulator -->\n# Title\n')], ['simulator']);
    assert.deepEqual([...pageOptions('# Title\n')], []);
    assert.deepEqual([...pageOptions('<!-- docs-test: brokers -->\n')], ['brokers']);
    assert.throws(
      () => pageOptions('<!-- docs-test: simulator, phone -->\n'),
      /unknown docs-test option phone/,
    );
  });
});
