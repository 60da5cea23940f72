#!/usr/bin/env node
// Builds the dashboard (web/, Preact + Vite) into dist/dashboard, which the server serves under /dashboard/.
// `npm start` (prestart) and `npm ci` (prepare) run it; a failed build there is reported and tolerated, since the
// API does not need the dashboard and /dashboard/ then says how to build it. `--strict` (npm run build:dashboard)
// exits 1 on failure instead.
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const configFile = fileURLToPath(new URL('../web/vite.config.ts', import.meta.url));
try {
  await build({ configFile, logLevel: 'warn' });
} catch (error) {
  const reason = error instanceof Error ? error.message : String(error);
  console.error(
    `parley: the dashboard could not be built (${reason}); the API works, /dashboard/ says how to build it`,
  );
  if (process.argv.includes('--strict')) process.exit(1);
}
