/**
 * The pages the executable docs run (README.md and docs/*.md) and how one is read: its fenced blocks, the steps a
 * block is cut into at its `# →` lines, what such a line matches, the variables a run fills in and the options a
 * page asks for. The convention itself is written at the top of docs.test.ts.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/parley-process.ts';

/** One fenced block of a page. */
export interface Block {
  lang: string;
  attributes: string[];
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
}

/** A step of a block: some commands and the lines their output must contain. */
export interface Step {
  code: string;
  expected: string[];
  /** 1-based line of the step's first line in the page. */
  line: number;
}

/** The fenced code blocks of a Markdown page (CommonMark backtick fences; an info string has no backtick). */
export function fencedBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})([^`]*)$/.exec(lines[i] ?? '');
    if (!open) continue;
    const fence = open[1] ?? '```';
    const [lang = '', ...attributes] = (open[2] ?? '').trim().split(/\s+/);
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !new RegExp(`^${fence}\`*\\s*$`).test(lines[j] ?? ''))
      body.push(lines[j++] ?? '');
    blocks.push({ lang, attributes, code: body.join('\n'), line: i + 1 });
    i = j;
  }
  return blocks;
}

const EXPECT_LINE = /^\s*# → ?(.*)$/;
const EXPECT_TRAILING = /\s# → ?(.*)$/;

/** Cuts a block into steps after each run of `# →` lines (or a command line ending in `# → …`). */
export function stepsOf(block: Block): Step[] {
  const steps: Step[] = [];
  let code: string[] = [];
  let expected: string[] = [];
  let start = block.line + 1;
  const flush = (next: number) => {
    if (code.some((l) => l.trim() !== '' && !l.trim().startsWith('#')) || expected.length > 0) {
      steps.push({ code: code.join('\n'), expected, line: start });
    }
    code = [];
    expected = [];
    start = next;
  };
  block.code.split('\n').forEach((text, index) => {
    const line = block.line + 1 + index;
    const own = EXPECT_LINE.exec(text);
    if (own) {
      expected.push(own[1] ?? '');
      return;
    }
    if (expected.length > 0) flush(line);
    const trailing = EXPECT_TRAILING.exec(text);
    code.push(text);
    if (trailing && !text.trimStart().startsWith('#')) expected.push(trailing[1] ?? '');
  });
  flush(0);
  return steps;
}

/** The regular expression of a `# →` line: `…`/`...` match any text, the rest literally, spaces loosely. */
export function expectation(text: string): RegExp {
  const parts = text.trim().split(/…|\.\.\./);
  const literal = parts.map((part) =>
    part
      .split(/\s+/)
      .map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('\\s+'),
  );
  return new RegExp(`^\\s*${literal.join('.*')}\\s*$`);
}

/** Whether some line of `output` matches `pattern`. */
export function hasLine(output: string, pattern: RegExp): boolean {
  return output.split('\n').some((line) => pattern.test(line));
}

/**
 * Replaces the value of the page's variable assignments (`PARLEY=`, `KEY=`, …: the names in `values`) with the
 * test's. An assignment computed by a command (`KEY=$(…)`, `KEY="$(…)"`) stays as written.
 */
export function withServerVariables(code: string, values: Record<string, string>): string {
  return code.replace(
    /^(\s*(?:export\s+)?)([A-Z_]+)=("[^"]*"|'[^']*'|\S*)/gm,
    (whole, prefix: string, name: string, assigned: string) => {
      const value = values[name];
      if (value === undefined || /^"?\$\(/.test(assigned)) return whole;
      return `${prefix}${name}='${value}'`;
    },
  );
}

/** What a page may ask of the test in `<!-- docs-test: … -->` comments. */
const PAGE_OPTIONS = ['simulator', 'brokers'] as const;
export type PageOption = (typeof PAGE_OPTIONS)[number];

/**
 * The options of a page's `<!-- docs-test: a b -->` comments (words separated by spaces or commas).
 * @throws AssertionError naming an option the test does not know.
 */
export function pageOptions(markdown: string): Set<PageOption> {
  const options = new Set<PageOption>();
  for (const [, words = ''] of markdown.matchAll(/^<!--\s*docs-test:([^>]*?)-->\s*$/gm)) {
    for (const word of words.split(/[\s,]+/).filter(Boolean)) {
      const option = PAGE_OPTIONS.find((known) => known === word);
      assert.ok(option, `unknown docs-test option ${word} (known: ${PAGE_OPTIONS.join(', ')})`);
      options.add(option);
    }
  }
  return options;
}

/** The pages: README.md, then docs/*.md in name order. */
export function pages(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

/** The pages to run: all, or those whose path contains DOCS_TEST_PAGE (while editing one page). */
export function pagesToRun(): string[] {
  const only = process.env.DOCS_TEST_PAGE;
  return pages().filter((page) => only === undefined || only === '' || page.includes(only));
}
