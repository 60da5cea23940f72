import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { extended } from '../../src/domain/objects.ts';

/**
 * The per-request and per-event code builds no object literal that starts with the spread of an object and goes on
 * with keys of its own (`{ ...base, extra }`): on Node 20's V8 each such literal gets a hidden class of its own at
 * every evaluation (docs/decisions/0071-shared-object-shapes.md); `extended` (src/domain/objects.ts) builds the same
 * object with shared ones. Checked on the TypeScript syntax tree of the folders a send, an event and a delivery go
 * through; route schemas built once at start-up may keep the spread.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
/** The folders every send, event and delivery runs code of. */
const HOT = ['src/events', 'src/sends', 'src/store', 'src/webhooks', 'src/sessions'];

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(rel);
    return entry.name.endsWith('.ts') ? [rel] : [];
  });
}

/** `file:line` of each literal that starts with a spread and has more members. */
function spreadFirstLiterals(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isObjectLiteralExpression(node)) {
      const [first, ...rest] = node.properties;
      if (first && ts.isSpreadAssignment(first) && rest.length > 0) {
        found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('object shapes on the hot path (docs/decisions/0071-shared-object-shapes.md)', () => {
  it('finds the literals it looks for', () => {
    assert.deepEqual(spreadFirstLiterals('a.ts', 'const a = { ...b, c: 1 }; const d = { c: 1, ...b };'), [
      'a.ts:1',
    ]);
    assert.deepEqual(spreadFirstLiterals('a.ts', 'const a = { ...b };\nconst e = {\n  ...b,\n  ...c,\n};'), [
      'a.ts:2',
    ]);
  });

  it('the folders of a send, an event and a delivery build none', () => {
    const files = HOT.flatMap(sourceFiles);
    assert.ok(files.length > 50, `read ${files.length} files`);
    const found = files.flatMap((file) =>
      spreadFirstLiterals(file, readFileSync(path.join(ROOT, file), 'utf8')),
    );
    assert.deepEqual(found, [], 'use extended(base, extra) from src/domain/objects.ts');
  });

  it('extended copies like a spread: base keys in order, replaced in place, new ones after; the base unchanged', () => {
    const base = { type: 'Message', event: { id: 'A' }, state: undefined };
    const copy = extended(base, { state: 'open', instanceId: 'i-1', sequence: 7 });
    assert.equal(
      JSON.stringify(copy),
      '{"type":"Message","event":{"id":"A"},"state":"open","instanceId":"i-1","sequence":7}',
    );
    assert.deepEqual(Object.keys(base), ['type', 'event', 'state']);
    assert.equal(copy.event, base.event, 'a shallow copy');
    assert.equal(Object.getPrototypeOf(copy), Object.prototype);
  });
});
