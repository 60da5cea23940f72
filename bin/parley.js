#!/usr/bin/env node
// parley's command line: `parley serve` starts the service (what `npm start` runs), `parley sim` the platform
// simulator, the rest administers the store (docs/cli.md). It runs the compiled JavaScript in dist/, in this process,
// so signals (SIGTERM, SIGINT) reach the server itself.
//
// In a checkout (src/ beside bin/) with the development dependencies installed, it first rebuilds the parts of dist/
// whose sources changed since the last build (scripts/build.js in a child process; a few milliseconds when nothing
// did), so `npm ci && npm start` on a fresh clone builds and serves, and a start after an edit runs the edit. An
// installed package has no sources: it runs dist/ as shipped. See docs/decisions/0014-compiled-build-and-licences.md.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

// The process that started this one, read before anything else: a launcher that ends while the build below runs
// must still be seen gone by a server started from npm (docs/decisions/0023-operations.md), whose parent is by then
// init (or a subreaper).
const launcherPid = process.ppid;
const root = new URL('../', import.meta.url);
const entry = new URL(process.argv[2] === 'sim' ? 'dist/sim/cli.js' : 'dist/src/cli/main.js', root);

if (existsSync(new URL('src/', root)) && existsSync(new URL('scripts/build.js', root))) {
  const { staleParts } = await import('../scripts/build-stamp.js');
  if (staleParts().length > 0) {
    let tools = true;
    try {
      createRequire(import.meta.url).resolve('esbuild');
    } catch {
      tools = false;
    }
    if (tools) {
      // the build's output goes to stderr (fd 2), keeping stdout for the command's own output
      const build = spawnSync(
        process.execPath,
        [fileURLToPath(new URL('scripts/build.js', root)), '--if-stale', '--tolerate-dashboard'],
        { stdio: ['ignore', 2, 2] },
      );
      if (build.status !== 0) {
        console.error('parley: the build failed (see above); fix it, or run `npm run build` to see it again');
        process.exit(1);
      }
    } else if (existsSync(entry)) {
      console.error(
        'parley: dist/ is older than the sources and the build tools are not installed (npm ci installs them); running dist/ as it is',
      );
    }
  }
}

if (!existsSync(entry)) {
  console.error(
    `parley: ${fileURLToPath(entry)} does not exist: run \`npm ci\` (development dependencies included), then \`npm run build\``,
  );
  process.exit(1);
}
// `parley sim …` hands the simulator its own arguments; the CLI parses the whole argv (commander) and is told who
// launched it
if (process.argv[2] === 'sim') {
  const { main } = await import(entry.href);
  process.exitCode = await main(process.argv.slice(3));
} else {
  const { main, processIo } = await import(entry.href);
  process.exitCode = await main(process.argv, { ...processIo, launcherPid });
}
