#!/usr/bin/env node
// parley's command line: `parley serve` starts the service, the rest administers the store (DESIGN D3).
// TypeScript sources are loaded through tsx, so a fresh clone runs without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv);
