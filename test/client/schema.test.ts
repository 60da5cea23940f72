import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  CLIENT_GENERATE_COMMAND,
  CLIENT_SCHEMA_PATH,
  clientSchemaSource,
} from '../../scripts/client-generate.ts';

/**
 * packages/client/src/schema.ts is generated from the routes (docs/decisions/0032-client-library.md): a route whose
 * schema changed without the types being generated again fails here, naming the command that fixes it.
 */
describe('the committed client types match /openapi.json', () => {
  it(`packages/client/src/schema.ts is what \`${CLIENT_GENERATE_COMMAND}\` writes now`, async () => {
    const expected = await clientSchemaSource();
    const committed = readFileSync(CLIENT_SCHEMA_PATH, 'utf8');
    if (committed === expected) return;
    const committedLines = committed.split('\n');
    const expectedLines = expected.split('\n');
    const at = expectedLines.findIndex((line, i) => line !== committedLines[i]);
    assert.fail(
      `packages/client/src/schema.ts is out of date with the routes' OpenAPI document: run \`${CLIENT_GENERATE_COMMAND}\` ` +
        `at the repository root and commit the result.\nFirst difference at line ${at + 1}:\n` +
        `  committed: ${committedLines[at] ?? '(end of file)'}\n  generated: ${expectedLines[at] ?? '(end of file)'}`,
    );
  });
});
