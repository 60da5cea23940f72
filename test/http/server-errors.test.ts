import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import pino from 'pino';
import { DomainError } from '../../src/domain/errors.ts';
import { errorsPlugin } from '../../src/http/plugins/errors.ts';

/** 5xx answers of the one error handler: logged with the request id; an internal error's text is never sent. */
/** An app with only the error handler, logging JSON lines into `lines`; request ids come from `x-request-id`. */
function makeApp(lines: Record<string, unknown>[]) {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line));
      done();
    },
  });
  return Fastify({
    loggerInstance: pino({ level: 'info' }, stream),
    disableRequestLogging: true,
    requestIdHeader: 'x-request-id',
  });
}

describe('server-side errors are logged with the request id (error handler)', () => {
  const lines: Record<string, unknown>[] = [];
  const app = makeApp(lines);

  before(async () => {
    await app.register(errorsPlugin);
    app.get('/internal', async () => {
      throw new DomainError('internal', 'route is missing its auth scope');
    });
    app.get('/unreachable', async () => {
      throw new DomainError('platform_unreachable', 'cannot reach the platform: connection refused');
    });
    app.get('/conflict', async () => {
      throw new DomainError('not_connected', 'instance is not connected');
    });
    await app.ready();
  });

  after(() => app.close());

  /** The log lines of the request with id `reqId`. */
  const linesOf = (reqId: string) => lines.filter((line) => line.reqId === reqId);

  it('answers an internal DomainError as 500 `internal error` and logs its text with the request id', async () => {
    const response = await app.inject({ url: '/internal', headers: { 'x-request-id': 'req-internal' } });
    assert.equal(response.statusCode, 500);
    assert.deepEqual(response.json(), { error: { code: 500, message: 'internal error' } });
    assert.doesNotMatch(response.body, /auth scope/);
    const logged = linesOf('req-internal');
    assert.equal(logged.length, 1);
    assert.equal(logged[0]?.level, 50);
    assert.equal(logged[0]?.msg, 'internal error');
    assert.match(JSON.stringify(logged[0]?.err), /route is missing its auth scope/);
  });

  it('keeps the message of another 5xx (it tells the client what to do) and logs it with the request id', async () => {
    const response = await app.inject({
      url: '/unreachable',
      headers: { 'x-request-id': 'req-unreachable' },
    });
    assert.equal(response.statusCode, 503);
    assert.deepEqual(response.json(), {
      error: { code: 503, message: 'cannot reach the platform: connection refused' },
    });
    const logged = linesOf('req-unreachable');
    assert.equal(logged.length, 1);
    assert.equal(logged[0]?.level, 40);
    assert.equal(logged[0]?.status, 503);
  });

  it('does not log a 4xx', async () => {
    const response = await app.inject({ url: '/conflict', headers: { 'x-request-id': 'req-conflict' } });
    assert.equal(response.statusCode, 409);
    assert.deepEqual(response.json(), { error: { code: 409, message: 'instance is not connected' } });
    assert.equal(linesOf('req-conflict').length, 0);
  });
});
