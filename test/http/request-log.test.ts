import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { REDACTED, redactUrl } from '../../src/http/log-redaction.ts';
import { requestLoggerFactory } from '../../src/http/request-logger.ts';
import { createServices, type Services } from '../../src/services.ts';
import { createTestStore, type TestStore } from '../support/store.ts';

describe('query strings are redacted in logs (docs/decisions/0020-security-promises.md: keys are never logged)', () => {
  it('redacts the values of secret-looking parameters, keeps names, path and the rest', () => {
    assert.equal(redactUrl('/v1/session/status'), '/v1/session/status');
    assert.equal(
      redactUrl('/v1/session/status?api_key=svc_test_abc&from=5511999990001'),
      `/v1/session/status?api_key=${REDACTED}&from=5511999990001`,
    );
    assert.equal(
      redactUrl(
        '/x?key=1&token=2&secret=3&signature=4&password=5&access_token=6&apiKey=7&X-Api-Key=8&client_secret=9&sig=10&hmacKey=11&auth=12&limit=20&cursor=abc',
      ),
      `/x?key=${REDACTED}&token=${REDACTED}&secret=${REDACTED}&signature=${REDACTED}&password=${REDACTED}` +
        `&access_token=${REDACTED}&apiKey=${REDACTED}&X-Api-Key=${REDACTED}&client_secret=${REDACTED}` +
        `&sig=${REDACTED}&hmacKey=${REDACTED}&auth=${REDACTED}&limit=20&cursor=abc`,
    );
    assert.equal(redactUrl('/x?api%5Fkey=s3cret&debug'), `/x?api%5Fkey=${REDACTED}&debug`);
    assert.equal(redactUrl('/x?token'), `/x?token=${REDACTED}`);
  });

  it('at debug an arriving request is logged too, redacted; at warn no request line is written', async () => {
    for (const level of ['debug', 'warn'] as const) {
      const testStore = await createTestStore('sqlite');
      const lines: Record<string, unknown>[] = [];
      const stream = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString('utf8').split('\n'))
            if (line !== '') lines.push(JSON.parse(line));
          done();
        },
      });
      const services = await createServices(loadConfig({ DATA_DIR: testStore.dataDir, LOG_LEVEL: level }), {
        logger: pino({ level }, stream),
        store: testStore.store,
      });
      const app = await buildApp(services);
      try {
        await app.ready();
        // Each request's pino child is made at its first written line (src/http/request-logger.ts).
        assert.equal(app.childLoggerFactory, requestLoggerFactory);
        const response = await app.inject({
          method: 'GET',
          url: '/v1/session/status?token=tok-5e1b&from=x',
          headers: { 'x-request-id': `level-${level}` },
        });
        assert.equal(response.statusCode, 401);
        const mine = lines
          .filter((line) => line.reqId === `level-${level}`)
          .map((line) => [line.msg, line.url]);
        assert.deepEqual(
          mine,
          level === 'debug'
            ? [
                ['incoming request', `/v1/session/status?token=${REDACTED}&from=x`],
                ['request', `/v1/session/status?token=${REDACTED}&from=x`],
              ]
            : [],
        );
      } finally {
        await app.close();
        await services.close({ keepStore: true });
        await testStore.cleanup();
      }
    }
  });

  describe('the request log of a running app', () => {
    let testStore: TestStore;
    let services: Services;
    let app: FastifyInstance;
    let key: string;
    let instanceId: string;
    const lines: Record<string, unknown>[] = [];

    before(async () => {
      testStore = await createTestStore('sqlite');
      const config = loadConfig({ DATA_DIR: testStore.dataDir, LOG_LEVEL: 'info' });
      const stream = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString('utf8').split('\n'))
            if (line !== '') lines.push(JSON.parse(line));
          done();
        },
      });
      services = await createServices(config, {
        logger: pino({ level: 'info' }, stream),
        store: testStore.store,
      });
      app = await buildApp(services);
      await app.ready();
      const db = testStore.store.db;
      const org = await adminCreateOrg(db, { name: 'log-org', plan: 'free' });
      instanceId = (await adminCreateInstance(db, { org: org.id, env: 'test', name: 'main' })).id;
      key = (await adminCreateKey(db, { org: org.id, env: 'test' }, Date.now())).key;
    });
    after(async () => {
      await app.close();
      await services.close({ keepStore: true });
      await testStore.cleanup();
    });

    it('GET /v1/session/status?api_key=<key> never writes the key', async () => {
      const secrets = { api_key: key, token: 'tok-7f3a9c', password: 'hunter2-pw', signature: 'sig-0d9e8f' };
      const query = new URLSearchParams({ ...secrets, from: instanceId }).toString();
      const response = await app.inject({
        method: 'GET',
        url: `/v1/session/status?${query}`,
        headers: { authorization: `Bearer ${key}`, 'x-request-id': 'log-probe-1' },
      });
      assert.equal(response.statusCode, 200, response.body);
      const mine = lines.filter((line) => line.reqId === 'log-probe-1');
      assert.equal(mine.length, 1, `expected one line per request, got ${JSON.stringify(mine)}`);
      const text = JSON.stringify(mine);
      for (const [name, value] of Object.entries(secrets)) {
        assert.ok(!text.includes(value), `${name} value must not be logged: ${text}`);
      }
      const logged = mine.find((line) => line.msg === 'request') as { url?: string };
      assert.equal(
        logged?.url,
        `/v1/session/status?api_key=${REDACTED}&token=${REDACTED}&password=${REDACTED}&signature=${REDACTED}&from=${instanceId}`,
      );
    });

    it('the redaction holds for a refused request and an unknown route too', async () => {
      await app.inject({
        method: 'GET',
        url: `/v1/session/status?key=${key}`,
        headers: { 'x-request-id': 'p2' },
      });
      await app.inject({ method: 'GET', url: `/nowhere?secret=${key}`, headers: { 'x-request-id': 'p3' } });
      const mine = lines.filter((line) => line.reqId === 'p2' || line.reqId === 'p3');
      assert.equal(mine.length, 2, JSON.stringify(mine));
      assert.ok(!JSON.stringify(mine).includes(key));
      assert.ok(!JSON.stringify(lines).includes(key), 'no log line anywhere carries the key');
    });
  });
});
