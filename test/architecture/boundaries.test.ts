import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

/**
 * The layer boundaries of docs/architecture.md, checked on the import statements of every file under src/:
 * src/http translates HTTP and calls application services (never the store, an engine, sessions, the send queue,
 * webhooks or nodes), engines speak the platform
 * (never the store), only the process entry points sit above the HTTP layer, and src/domain depends on nothing.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const SRC = path.join(ROOT, 'src');

/** Every .ts file under `dir`, as paths relative to the repository root with forward slashes. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [path.relative(ROOT, full).split(path.sep).join('/')] : [];
  });
}

/** The project files `file` imports (static, `export … from` and dynamic `import()`), relative to the root. */
function projectImports(file: string): string[] {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const specifiers = [
    ...text.matchAll(/^\s*(?:import|export)\b[^'";]*?\bfrom\s+['"]([^'"]+)['"]/gm),
    ...text.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm),
    ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((match) => match[1] ?? '');
  return specifiers
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) =>
      path
        .relative(ROOT, path.resolve(path.dirname(path.join(ROOT, file)), specifier))
        .split(path.sep)
        .join('/'),
    );
}

interface Rule {
  name: string;
  /** Files the rule applies to. */
  from: (file: string) => boolean;
  /** Imports the rule forbids for those files. */
  forbids: (target: string) => boolean;
}

const under = (folder: string) => (file: string) => file.startsWith(`${folder}/`);

/**
 * What a file under src/http may import (docs/architecture.md): everything else (the store, engines, sessions, the
 * send queue, webhooks, nodes, events, src/services.ts and src/wiring) is reached through the application services
 * of `HttpServices` (src/app/http-services.ts).
 */
const HTTP_MAY_IMPORT = [
  'src/http',
  'src/app',
  'src/domain',
  // The settings' types (HttpServices.config).
  'src/config',
  // Pure formatting of the RateLimit headers (docs/decisions/0019-rate-limits-and-plans.md).
  'src/ratelimit/limiter.ts',
  // Checking and preparing a media file of a send request before the service sends it, and the body limits per
  // media kind (docs/decisions/0017-messages-and-media.md).
  'src/media',
  // The message body shape of the history view, shared with the webhook payloads
  // (docs/decisions/0018-webhook-events-and-payloads.md).
  'src/events/normalise.ts',
];

const RULES: Rule[] = [
  {
    name: 'src/http sees only the application services (src/app), the domain, its own files and the listed helpers',
    from: under('src/http'),
    forbids: (target) => !HTTP_MAY_IMPORT.some((allowed) => target === allowed || under(allowed)(target)),
  },
  {
    name: 'engines speak the platform, never the store',
    from: under('src/engines'),
    forbids: under('src/store'),
  },
  {
    name: 'only the process entry points (src/server.ts, src/cli) sit above the HTTP layer',
    from: (file) => !under('src/http')(file) && !under('src/cli')(file) && file !== 'src/server.ts',
    forbids: under('src/http'),
  },
  {
    name: 'src/domain imports nothing of the project',
    from: under('src/domain'),
    forbids: (target) => !under('src/domain')(target),
  },
];

/**
 * Imports that still break a rule, as `importer -> imported`. Each is a known gap of the layering work still
 * to be done; the test fails when one is fixed and not removed here, so this list only shrinks.
 */
const ALLOWED_EXCEPTIONS = new Set<string>([]);

describe('layer boundaries (docs/architecture.md)', () => {
  const files = sourceFiles(SRC);
  const violations = RULES.flatMap((rule) =>
    files.filter(rule.from).flatMap((file) =>
      projectImports(file)
        .filter(rule.forbids)
        .map((target) => ({ rule: rule.name, edge: `${file} -> ${target}` })),
    ),
  );

  it('finds the source files and their imports', () => {
    assert.ok(files.length > 100, `only ${files.length} files found under src/`);
    assert.ok(projectImports('src/server.ts').includes('src/http/app.ts'));
  });

  it('no import breaks a boundary beyond the listed exceptions', () => {
    const unexpected = violations.filter((v) => !ALLOWED_EXCEPTIONS.has(v.edge));
    assert.deepEqual(
      unexpected.map((v) => `${v.rule}: ${v.edge}`),
      [],
      'an import crosses a layer boundary (docs/architecture.md)',
    );
  });

  it('every listed exception still exists (remove the ones fixed)', () => {
    const edges = new Set(violations.map((v) => v.edge));
    assert.deepEqual(
      [...ALLOWED_EXCEPTIONS].filter((edge) => !edges.has(edge)),
      [],
    );
  });
});
