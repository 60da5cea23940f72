import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { cachingStatements, STATEMENT_CACHE_SIZE } from '../../src/store/database.ts';

describe('SQLite prepared statements reused by SQL text (src/store/database.ts)', () => {
  it('prepares a text once, and past the bound drops the least recently used statement first', () => {
    const sqlite = new SQLite(':memory:');
    let prepared = 0;
    const prepare = sqlite.prepare.bind(sqlite);
    sqlite.prepare = ((text: string) => {
      prepared += 1;
      return prepare(text);
    }) as typeof sqlite.prepare;
    const database = cachingStatements(sqlite);
    const text = (n: number) => `select ${n} as n`;
    const first = database.prepare(text(0));
    assert.equal(database.prepare(text(0)), first, 'the same text gives the same statement');
    assert.equal(prepared, 1);
    for (let n = 1; n < STATEMENT_CACHE_SIZE; n++) database.prepare(text(n));
    assert.equal(prepared, STATEMENT_CACHE_SIZE);
    // Text 0 used again: text 1 is now the least recently used, and the next new text pushes it out.
    assert.equal(database.prepare(text(0)), first);
    database.prepare(text(STATEMENT_CACHE_SIZE));
    assert.equal(prepared, STATEMENT_CACHE_SIZE + 1);
    assert.equal(database.prepare(text(0)), first, 'a recently used statement is kept');
    assert.equal(prepared, STATEMENT_CACHE_SIZE + 1);
    database.prepare(text(1));
    assert.equal(prepared, STATEMENT_CACHE_SIZE + 2, 'the least recently used one was prepared again');
    assert.deepEqual(database.prepare(text(7)).all([]), [{ n: 7 }]);
    database.close();
  });
});
