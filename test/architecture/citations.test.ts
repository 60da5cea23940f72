import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

/**
 * The repository carries its own reasons (docs/decisions/README.md): code, tests and docs cite decision records
 * (`docs/decisions/NNNN-name.md`), docs pages or RFCs, never notes kept outside the repository (the product
 * contract and design notes by their names, their numbered sections, tracker issue numbers). Third-party
 * references (a Baileys or Node.js issue, a GitHub URL) are citations a reader can follow and stay allowed.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const SELF = 'test/architecture/citations.test.ts';
const DECISIONS = 'docs/decisions';

/** Where citations are looked for: folders walked recursively, and single files. */
const SCOPE = [
  'src',
  'sim',
  'web',
  'packages',
  'bench',
  'scripts',
  'test',
  'docs',
  '.ci',
  'README.md',
  'package.json',
  'biome.json',
  'tsconfig.json',
];
const TEXT = /(\.(ts|tsx|js|mjs|cjs|md|json|html|css|sh|ya?ml)|^\.ci\/run)$/;
const SKIPPED_DIRS = new Set(['node_modules', 'dist']);

/** Every text file in {@link SCOPE}, as paths relative to the root with forward slashes. */
function textFiles(): string[] {
  const walk = (relative: string): string[] => {
    const full = path.join(ROOT, relative);
    if (!existsSync(full)) return [];
    if (!statSync(full).isDirectory()) return TEXT.test(relative) ? [relative] : [];
    return readdirSync(full)
      .filter((name) => !SKIPPED_DIRS.has(name))
      .flatMap((name) => walk(`${relative}/${name}`));
  };
  return SCOPE.flatMap(walk).filter((file) => file !== SELF);
}

// The patterns are assembled from pieces so that this file does not read as a citation itself.
const word = (...parts: string[]) => new RegExp(`\\b${parts.join('')}\\b`);
/** What cites notes kept outside the repository, each with the reason reported. */
const OUTSIDE: readonly (readonly [RegExp, string])[] = [
  [word('DES', 'IGN'), 'names the design notes'],
  [word('SP', 'EC'), 'names the contract notes'],
  [/(?<![\w'"`.#/-])D(?:[1-9]|1\d|2\d)(?![\w'"`.-])/, 'cites a numbered design section'],
  [new RegExp(['\\bis', 'sue:? #?\\d+'].join(''), 'i'), 'cites a tracker issue number'],
];
/** A line naming a third party keeps its issue numbers: those are public and can be followed. */
const THIRD_PARTY =
  /baileys|whiskeysockets|whatsmeow|evolution|waha|wuzapi|wppconnect|libsignal|node\.?js|github\.com|upstream/i;

/** A record cited by path anywhere, or by a relative link inside docs/decisions. */
const RECORD_BY_PATH = /docs\/decisions\/(\d{4}-[a-z0-9-]+\.md)/g;
const RECORD_BY_LINK = /\]\((\d{4}-[a-z0-9-]+\.md)(?:#[^)]*)?\)/g;

/** The records present: `NNNN-name.md` files under docs/decisions. */
function records(): string[] {
  return readdirSync(path.join(ROOT, DECISIONS))
    .filter((name) => /^\d{4}-[a-z0-9-]+\.md$/.test(name))
    .sort();
}

describe('citations stay inside the repository', () => {
  const files = textFiles();

  it('finds the files it checks', () => {
    assert.ok(
      files.includes('README.md') && files.includes('src/server.ts'),
      'README.md and src/ are walked',
    );
    assert.ok(
      files.some((file) => file.startsWith(`${DECISIONS}/`)),
      'the decision records are walked',
    );
  });

  it('cites no notes kept outside the repository and no tracker issue numbers', () => {
    const found: string[] = [];
    for (const file of files) {
      readFileSync(path.join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, index) => {
          for (const [pattern, why] of OUTSIDE) {
            if (!pattern.test(line)) continue;
            if (why.includes('tracker') && THIRD_PARTY.test(line)) continue;
            found.push(`${file}:${index + 1}: ${why}: ${line.trim().slice(0, 140)}`);
          }
        });
    }
    assert.deepEqual(found, [], `cite docs/decisions/ or a docs page instead:\n${found.join('\n')}`);
  });

  it('every decision record cited exists', () => {
    const present = new Set(records());
    const missing: string[] = [];
    for (const file of files) {
      const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
      lines.forEach((line, index) => {
        const cited = [...line.matchAll(RECORD_BY_PATH)].map((match) => match[1] ?? '');
        if (file.startsWith(`${DECISIONS}/`)) {
          cited.push(...[...line.matchAll(RECORD_BY_LINK)].map((match) => match[1] ?? ''));
        }
        for (const record of cited) {
          if (!present.has(record)) missing.push(`${file}:${index + 1}: ${DECISIONS}/${record}`);
        }
      });
    }
    assert.deepEqual(missing, [], `cited records that do not exist:\n${missing.join('\n')}`);
  });

  it('has the decision records, each with its status, context, decision and consequences, in the index', () => {
    const present = records();
    assert.ok(present.length >= 8, `at least 8 records (found ${present.length})`);
    const index = readFileSync(path.join(ROOT, DECISIONS, 'README.md'), 'utf8');
    for (const record of present) {
      const text = readFileSync(path.join(ROOT, DECISIONS, record), 'utf8');
      const number = record.slice(0, 4);
      assert.match(text, new RegExp(`^# ${number}\\. \\S`), `${record} starts with "# ${number}. <title>"`);
      assert.match(text, /^Status: (accepted|superseded by \d{4}|deprecated)$/m, `${record} has a status`);
      for (const section of ['Context', 'Decision', 'Consequences']) {
        assert.match(text, new RegExp(`^## ${section}$`, 'm'), `${record} has a ${section} section`);
      }
      assert.ok(index.includes(`](${record})`), `${DECISIONS}/README.md links ${record}`);
    }
  });
});
