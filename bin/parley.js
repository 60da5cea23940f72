#!/usr/bin/env node
// parley's command line: `parley serve` starts the service, the rest administers the store (DESIGN D3).
// `parley sim` starts the platform simulator, which lives outside src/ (DESIGN D15).
// TypeScript sources are loaded through tsx, so a fresh clone runs without a build step.
import { register } from 'tsx/esm/api';

register();
if (process.argv[2] === 'sim') {
  const { main } = await import('../sim/cli.ts');
  process.exitCode = await main(process.argv.slice(3));
} else {
  const { main } = await import('../src/cli/main.ts');
  process.exitCode = await main(process.argv);
}
