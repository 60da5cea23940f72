import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import pino, { type Bindings, type ChildLoggerOptions } from 'pino';
import { RequestLogger } from '../../src/http/request-logger.ts';

/** A pino logger at `level` writing into `lines`, with a count of the children made from it. */
function capture(level: pino.LevelWithSilent) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line));
      done();
    },
  });
  const logger = pino({ level }, stream);
  const children: Bindings[] = [];
  const parent: FastifyBaseLogger = Object.assign(Object.create(logger) as FastifyBaseLogger, {
    child(bindings: Bindings, options?: ChildLoggerOptions) {
      children.push(bindings);
      return logger.child(bindings, options);
    },
  });
  return { lines, children, parent };
}

/** Lets the stream's writes land. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('a request logger makes its pino child at its first written line', () => {
  it('makes no child while nothing is written at an enabled level', async () => {
    const { lines, children, parent } = capture('warn');
    const log = new RequestLogger(parent, { reqId: 'r-1' }, {});
    log.info({ url: '/x' }, 'request');
    log.debug('detail');
    log.trace('more');
    log.silent('nothing');
    assert.equal(log.level, 'warn');
    await settled();
    assert.deepEqual(children, []);
    assert.deepEqual(lines, []);
  });

  it('writes enabled lines with the request bindings through one child', async () => {
    const { lines, children, parent } = capture('warn');
    const log = new RequestLogger(parent, { reqId: 'r-2' }, {});
    log.warn({ code: 7 }, 'first');
    log.error('second %s', 'formatted');
    log.info('not written');
    await settled();
    assert.deepEqual(children, [{ reqId: 'r-2' }]);
    assert.deepEqual(
      lines.map((line) => [line.level, line.reqId, line.msg, line.code]),
      [
        [40, 'r-2', 'first', 7],
        [50, 'r-2', 'second formatted', undefined],
      ],
    );
  });

  it("takes the route's level before its child is made, and a level set later", async () => {
    const { lines, parent } = capture('warn');
    const log = new RequestLogger(parent, { reqId: 'r-3' }, { level: 'debug' });
    assert.equal(log.level, 'debug');
    log.debug('at the route level');
    log.level = 'error';
    log.warn('now below the level');
    log.error('still written');
    await settled();
    assert.deepEqual(
      lines.map((line) => [line.reqId, line.msg]),
      [
        ['r-3', 'at the route level'],
        ['r-3', 'still written'],
      ],
    );
  });

  it('gives children that carry the request bindings and their own', async () => {
    const { lines, parent } = capture('info');
    const log = new RequestLogger(parent, { reqId: 'r-4' }, {});
    log.child({ part: 'relay' }).info('from the child');
    await settled();
    assert.deepEqual(
      lines.map((line) => [line.reqId, line.part, line.msg]),
      [['r-4', 'relay', 'from the child']],
    );
  });
});
