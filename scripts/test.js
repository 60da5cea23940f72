#!/usr/bin/env node
// Runs every test/**/*.test.ts with Node's test runner (TypeScript through tsx), after building what is stale in dist/;
// test files share processes, a few per folder, except those that need one of their own (see entries()).
// Store suites run on SQLite always and on PostgreSQL when TEST_DATABASE_URL is set; rate-limit suites run
// in-process always and on Redis when TEST_REDIS_URL is set; video conversion runs when ffmpeg is found (packaged
// binary or PATH). What is not run is said, never hidden, and never fails the run.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = new URL('..', import.meta.url).pathname;

function find(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...find(path));
    else if (name.endsWith('.test.ts')) out.push(relative(root, path));
  }
  return out;
}

// `--quick` (npm run test:quick): the inner loop. It leaves out what starts real processes, browsers, the platform
// simulator with live sessions, several nodes, the executable docs and the package build; `npm test` runs all.
const quick = process.argv.includes('--quick');
const QUICK_SKIPS = [
  'test/live/',
  'test/nodes/',
  'test/docs/',
  'test/build/',
  'test/dashboard/browser',
  'test/webhooks/crash',
];

/**
 * How many entries of the main batch run at once: TEST_CONCURRENCY when set (a positive integer), else 3. On the
 * 2-core machine CI runs on, a whole CI run at two used 71 % of the cores (the multi-node and live files wait on the
 * processes, sockets and timers they start); at three they were 93–97 % busy and the main batch took 949 and 1,014 s
 * in two runs against 1,044–1,122 s in five at two, every test passing. More files than cores fills those waits.
 */
const MAIN_CONCURRENCY = (() => {
  const raw = process.env.TEST_CONCURRENCY;
  if (raw === undefined || raw === '') return 3;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`TEST_CONCURRENCY must be a positive integer (got ${JSON.stringify(raw)})`);
    process.exit(1);
  }
  return value;
})();

const filters = process.argv.slice(2).filter((arg) => arg !== '--quick');
const files = find(join(root, 'test'))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .filter((f) => !quick || !QUICK_SKIPS.some((skip) => f.startsWith(skip)))
  .sort();
if (files.length === 0) {
  console.error('no test files match');
  process.exit(1);
}

/** The advisory lock key a test run holds on TEST_DATABASE_URL's server while it runs (any constant of its own). */
const TEST_RUN_LOCK = 7_261_903_114;

/**
 * Whether this run is the only one on TEST_DATABASE_URL's server, and so may drop the test stores it finds: it takes
 * a session advisory lock (PostgreSQL manual, 9.27.10 Advisory Lock Functions) on a connection held until the process
 * exits. A second run at the same time (another checkout, a clean-clone check) gets false: it leaves the stores, so
 * it never drops the databases the first one's tests are using.
 */
async function onlyRun() {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) return false;
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  // a lost connection ends the lock with it; the run goes on and drops its own stores at the end as planned
  client.on('error', () => undefined);
  await client.connect();
  const { rows } = await client.query('select pg_try_advisory_lock($1) as locked', [TEST_RUN_LOCK]);
  if (rows[0]?.locked === true) return true;
  await client.end();
  console.log('another test run is using this PostgreSQL server: its test stores are left as they are');
  return false;
}

/**
 * PostgreSQL's codes for a database dropped meanwhile (`3D000`) and one another session is using (`55006`): a test
 * file started on its own, outside this runner, may be using or dropping its stores while the runner cleans up.
 */
const IN_USE_OR_GONE = new Set(['3D000', '55006']);

/**
 * Drops what test stores leave in TEST_DATABASE_URL's server (no other run of this script runs meanwhile,
 * {@link onlyRun}): the `t_<hex>` databases of test/support/store.ts and their templates `parley_tpl_<digest>`, and
 * the `t_<hex>` schemas other tests create in the TEST_DATABASE_URL database itself. A database some session still
 * uses (a test file run on its own) is left to it, and one dropped meanwhile is skipped. After the run (`templates`
 * false) the templates stay: a run started meanwhile, which found this one holding the server, copies its stores
 * from them, and the next run's start drops them.
 */
async function dropTestStores({ templates }) {
  const url = process.env.TEST_DATABASE_URL;
  if (!url || !alone) return;
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(
      "select nspname from pg_namespace where nspname ~ '^t_[0-9a-f]{12}$'",
    );
    for (const { nspname } of rows) await client.query(`drop schema if exists ${nspname} cascade`);
    const databases = await client.query(
      templates
        ? "select datname, datistemplate from pg_database where datname ~ '^(t_[0-9a-f]{12}|parley_tpl_[0-9a-f]{12}(_build)?)$'"
        : "select datname, datistemplate from pg_database where datname ~ '^t_[0-9a-f]{12}$'",
    );
    for (const { datname, datistemplate } of databases.rows) {
      try {
        // a template (test/support/store.ts marks it so) must be made an ordinary database before it can be dropped;
        // an ordinary one is dropped as it is, even one a drop interrupted left invalid (which refuses any alter)
        if (datistemplate) await client.query(`alter database ${datname} is_template false`);
        await client.query(`drop database if exists ${datname}`);
      } catch (error) {
        if (!IN_USE_OR_GONE.has(error?.code)) throw error;
      }
    }
  } finally {
    await client.end();
  }
}

const alone = await onlyRun();
await dropTestStores({ templates: true });

// Tests start parley as a user does (bin/parley.js runs the compiled dist/): build what is stale once, up front,
// instead of in the first test that starts a process.
const build = spawnSync(process.execPath, ['scripts/build.js', '--if-stale'], {
  cwd: root,
  stdio: 'inherit',
});
if (build.status !== 0) {
  console.error('the build failed (npm run build): the tests that start parley would fail');
  process.exit(1);
}

const notRun = [];
if (!process.env.TEST_DATABASE_URL)
  notRun.push('PostgreSQL store suites (set TEST_DATABASE_URL=postgres://…)');
if (!process.env.TEST_REDIS_URL) notRun.push('Redis rate-limit suites (set TEST_REDIS_URL=redis://…)');
// The Redis outage test kills and restarts a private redis-server of its own (test/ratelimit/redis-outage.test.ts).
if (
  process.env.TEST_REDIS_URL &&
  spawnSync('sh', ['-c', 'command -v redis-server'], { stdio: 'ignore' }).status !== 0 &&
  files.some((f) => f.startsWith('test/ratelimit/redis-outage'))
)
  notRun.push('the Redis outage test (no redis-server on PATH: apt-get install redis-server)');
if (!process.env.TEST_AMQP_URL || !process.env.TEST_NATS_URL)
  notRun.push(
    "broker endpoint suites against RabbitMQ and NATS (set TEST_AMQP_URL=amqp://… and TEST_NATS_URL=nats://…, this machine's brokers: the suites restart them)",
  );
// Animated-sticker conversion needs ffmpeg: the packaged binary (optional dependency), else `ffmpeg` on PATH.
// Asked of src/media/ffmpeg.ts itself, so the report and the tests agree on what the server would find.
const ffmpegProbe = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--input-type=module',
    '-e',
    "const { Ffmpeg } = await import('./src/media/ffmpeg.ts'); const f = new Ffmpeg(); process.stdout.write(JSON.stringify({ path: (await f.resolve()) ?? null, tried: f.candidates }));",
  ],
  { cwd: root, encoding: 'utf8' },
);
let ffmpeg = { path: null, tried: [] };
try {
  ffmpeg = JSON.parse(ffmpegProbe.stdout);
} catch {
  // the probe itself failed: report ffmpeg as not found
}
if (ffmpeg.path === null) {
  notRun.push(
    `animated sticker conversion tests (no ffmpeg runs here: tried ${ffmpeg.tried.join(', ') || 'nothing'}; put ffmpeg on PATH)`,
  );
}
// The dashboard's browser tests drive Debian's Chromium (installed by .ci/run); never a downloaded browser.
const chromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!existsSync(chromium))
  notRun.push(
    `dashboard browser tests (no Chromium at ${chromium}: apt-get install chromium, or set CHROMIUM_PATH)`,
  );
// The three-node SIGTERM test puts HAProxy in front of the nodes where it is installed (Debian's haproxy, as .ci/run does).
const haproxy = process.env.HAPROXY_PATH ?? '/usr/sbin/haproxy';
if (!existsSync(haproxy) && files.some((f) => f.startsWith('test/nodes/cluster-term')))
  notRun.push(
    `the HAProxy part of the three-node test (no HAProxy at ${haproxy}: apt-get install haproxy, or set HAPROXY_PATH)`,
  );
// The store test behind a connection pooler starts Debian's PgBouncer in transaction mode where it is installed.
const pgbouncer = process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer';
if (
  !existsSync(pgbouncer) &&
  process.env.TEST_DATABASE_URL &&
  files.some((f) => f.startsWith('test/store/pgbouncer'))
)
  notRun.push(
    `parley behind PgBouncer (no PgBouncer at ${pgbouncer}: apt-get install pgbouncer, or set PGBOUNCER_PATH)`,
  );
// The executable docs (test/docs) run the pages' shell examples: they need these commands (test/docs checks the same).
const docsTools = ['bash', 'curl', 'openssl', 'base64'];
const missingTools = docsTools.filter(
  (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
);
if (missingTools.length > 0 && files.some((f) => f.startsWith('test/docs/'))) {
  notRun.push(`the docs examples (test/docs needs ${missingTools.join(', ')} on PATH)`);
}
// Pages marked `<!-- docs-test: brokers -->` publish to RabbitMQ and NATS JetStream: test/docs defines their tests
// only when both brokers are named.
if (
  (!process.env.TEST_AMQP_URL || !process.env.TEST_NATS_URL) &&
  files.some((f) => f.startsWith('test/docs/'))
) {
  const brokerPages = ['README.md', ...readdirSync(join(root, 'docs')).map((name) => `docs/${name}`)]
    .filter((page) => page.endsWith('.md'))
    .filter((page) =>
      /^<!--\s*docs-test:[^>]*\bbrokers\b[^>]*-->\s*$/m.test(readFileSync(join(root, page), 'utf8')),
    )
    .sort();
  if (brokerPages.length > 0) {
    notRun.push(
      `the docs examples of ${brokerPages.join(', ')} (set TEST_AMQP_URL=amqp://… and TEST_NATS_URL=nats://… to this machine's RabbitMQ and NATS)`,
    );
  }
}
for (const line of notRun) console.log(`not run: ${line}`);

/**
 * Runs `batch` with Node's test runner; resolves with its exit status. `timeoutMs` bounds each test file and each
 * test (Node has one flag for both): 10 minutes for the main batch, whose entries are bundles of up to
 * {@link BUNDLE_SIZE} files (the dashboard's bundle took over 2 minutes on PostgreSQL in CI), and for the
 * executable docs (test/docs, a server and tens of CLI processes per page); the package test (test/build: npm pack,
 * then an install of the tarball that compiles better-sqlite3) gets 20, and so do the waiting files run beside the
 * main batch (their own tests set tighter bounds).
 * `concurrency` is how many files run at once ({@link MAIN_CONCURRENCY} for the main batch).
 */
function run(batch, timeoutMs, concurrency) {
  if (batch.length === 0) return Promise.resolve(0);
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--test',
        '--test-reporter=spec',
        `--test-concurrency=${concurrency}`,
        // Baileys leaves timers running after a socket ends (a 30 s pre-key upload race): a file whose tests are
        // done exits instead of waiting them out.
        '--test-force-exit',
        `--test-timeout=${timeoutMs}`,
        ...batch,
      ],
      { cwd: root, stdio: 'inherit', env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' } },
    );
    child.once('exit', (code) => resolve(code ?? 1));
    child.once('error', () => resolve(1));
  });
}

const isDocs = (f) => f.startsWith('test/docs/');
const isPack = (f) => f.startsWith('test/build/');
/**
 * Files that spend most of their time waiting on a real timer they test at its production length: Baileys shows the
 * first QR code for 60 s (test/live/qr-rotation), a PostgreSQL outage lasts 30 s like a restart or failover
 * (test/live/store-outage). They run one after another beside the main batch, outside its places, from its start: in
 * one of its places, each held that place for a minute of waiting; after it, the QR test set the run's end (67 s
 * against 54 s for the docs in CI).
 */
const WAITING = ['test/live/qr-rotation', 'test/live/store-outage.test.ts'];
const isWaiting = (f) => WAITING.some((prefix) => f.startsWith(prefix));

/**
 * Files that run in a process of their own: they start services, simulators, browsers or several nodes, kill
 * processes, or watch process-wide resources, and they are long, so they gain nothing from sharing a process.
 */
const ISOLATED = [
  'test/live/',
  'test/nodes/',
  'test/dashboard/browser',
  'test/webhooks/crash',
  'test/baileys/offline-connect',
];
/** Most test files one shared process runs. */
const BUNDLE_SIZE = 8;

/**
 * The entries Node's runner gets for `batch`: every isolated file as itself, the others bundled by folder, at most
 * {@link BUNDLE_SIZE} files a bundle. Each test file started as a process of its own paid about 3 s of start-up
 * (tsx and the module graph) on the 2-core machine, more than many files' tests take; a bundle is a generated
 * module that imports its files, so they share one process and register their tests in it. The isolated files
 * come first, so the long ones start early.
 */
function entries(batch) {
  const isolated = batch.filter((f) => ISOLATED.some((prefix) => f.startsWith(prefix)));
  const byFolder = new Map();
  for (const file of batch) {
    if (isolated.includes(file)) continue;
    const folder = file.split('/').slice(0, 2).join('/');
    byFolder.set(folder, [...(byFolder.get(folder) ?? []), file]);
  }
  const bundles = [];
  for (const [folder, group] of byFolder) {
    const count = Math.ceil(group.length / BUNDLE_SIZE);
    for (let i = 0; i < count; i++) {
      const part = group.filter((_, index) => index % count === i);
      const name = `${folder.replace(/[^a-z0-9]+/gi, '-')}-${i + 1}.test.mjs`;
      const path = join(bundleDir, name);
      writeFileSync(
        path,
        part.map((file) => `import ${JSON.stringify(pathToFileURL(join(root, file)).href)};`).join('\n') +
          '\n',
      );
      bundles.push(path);
    }
  }
  return [...isolated, ...bundles];
}

const bundleDir = mkdtempSync(join(tmpdir(), 'parley-test-bundles-'));
process.on('exit', () => rmSync(bundleDir, { recursive: true, force: true }));

// The rest first, MAIN_CONCURRENCY at a time, with the waiting files one at a time beside it (they take a core for
// seconds of their minutes); then the executable docs beside the package test: both mostly wait on the processes they
// start (servers, CLIs, npm), so together they take about as long as the longer.
const [main, waiting] = await Promise.all([
  run(entries(files.filter((f) => !isDocs(f) && !isPack(f) && !isWaiting(f))), 600_000, MAIN_CONCURRENCY),
  run(files.filter(isWaiting), 1_200_000, 1),
]);
const statuses = [
  main,
  waiting,
  ...(await Promise.all([run(files.filter(isDocs), 600_000, 1), run(files.filter(isPack), 1_200_000, 1)])),
];
for (const line of notRun) console.log(`not run: ${line}`);
await dropTestStores({ templates: false });
process.exit(statuses.find((status) => status !== 0) ?? 0);
