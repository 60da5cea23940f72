#!/usr/bin/env node
// `npm pack` hooks (prepack / postpack). `before` copies package-lock.json to npm-shrinkwrap.json, which npm puts in
// the package and, unlike package-lock.json, honours when the package is installed: an install of the tarball gets
// exactly the dependency tree this checkout was tested with, not whatever the registry's newest versions are.
// `after` removes the copy again (npm-shrinkwrap.json in a checkout would take precedence over package-lock.json).
// See docs/decisions/0014-compiled-build-and-licences.md.
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const shrinkwrap = join(root, 'npm-shrinkwrap.json');
const step = process.argv[2];
if (step === 'before') copyFileSync(join(root, 'package-lock.json'), shrinkwrap);
else if (step === 'after') rmSync(shrinkwrap, { force: true });
else {
  console.error('usage: node scripts/build-pack.js before|after');
  process.exit(2);
}
