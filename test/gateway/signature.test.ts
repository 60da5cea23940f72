import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp, type TestAppOptions } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const HMAC_KEY = 'gateway-signing-key-0123456789abcdef';
const PEER = '5511999990002';
const INVALID = { error: { code: 401, message: 'invalid request signature' } };
const STALE = {
  error: {
    code: 401,
    message: 'invalid request signature: x-timestamp is more than 300 seconds from the server time',
  },
};
const REPLAYED = {
  error: { code: 401, message: 'invalid request signature: this signature was already used' },
};

/**
 * docs/decisions/0021-gateway-form.md, computed independently of the server: hex HMAC-SHA256 over
 * `ts.METHOD.path?query.body`.
 */
function sign(key: string, timestamp: string, method: string, pathWithQuery: string, body: string): string {
  return createHmac('sha256', key).update(`${timestamp}.${method}.${pathWithQuery}.${body}`).digest('hex');
}

interface Signed {
  method: 'GET' | 'POST';
  url: string;
  body?: string;
  timestamp?: string;
  signature?: string;
  headers?: Record<string, string>;
}

const variants: { name: string; env: Record<string, string> }[] = [{ name: 'store', env: {} }];
if (process.env.TEST_REDIS_URL)
  variants.push({ name: 'redis', env: { REDIS_URL: process.env.TEST_REDIS_URL } });

for (const dialect of testDialects()) {
  for (const variant of variants) {
    describe(`gateway request signatures and replay (docs/decisions/0021-gateway-form.md) [${dialect}, replay memory: ${variant.name}]`, () => {
      let t: TestApp;
      const options: TestAppOptions = {
        dialect,
        env: variant.env,
        plan: { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 },
      };
      const now = () => String(Math.floor(t.clock() / 1000));

      /** Sends a gateway request through `app` (default: the test app), signed unless told otherwise. */
      async function send(request: Signed, app = t.app) {
        const timestamp = request.timestamp ?? now();
        const body = request.body ?? '';
        const signature = request.signature ?? sign(HMAC_KEY, timestamp, request.method, request.url, body);
        const response = await app.inject({
          method: request.method,
          url: request.url,
          headers: {
            authorization: `Bearer ${t.key}`,
            'x-instance-id': t.instance.id,
            'x-timestamp': timestamp,
            'x-signature': signature,
            ...(body === '' ? {} : { 'content-type': 'application/json' }),
            ...request.headers,
          },
          ...(body === '' ? {} : { payload: body }),
        });
        return { status: response.statusCode, body: response.json() };
      }

      before(async () => {
        t = await createTestApp(options);
        await loginSandbox(t);
        const configured = await t.call('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY });
        assert.equal(configured.status, 200);
      });
      after(() => t.close());

      it('a correct signature passes, on GET with a query and on POST with a body', async () => {
        const status = await send({ method: 'GET', url: '/session/status' });
        assert.equal(status.status, 200);
        assert.equal(status.body.data.loggedIn, true);
        const info = await send({ method: 'GET', url: `/user/info?phone=${PEER}` });
        assert.equal(info.status, 200);
        assert.equal(info.body.data.users[0].query, PEER);
        const raw = `{ "phone": "${PEER}",\n  "message": "signed ✓" }`;
        const text = await send({ method: 'POST', url: '/chat/send/text', body: raw });
        assert.equal(text.status, 200, JSON.stringify(text.body));
        const row = await t.services.store.db
          .selectFrom('messages')
          .select('content')
          .where('id', '=', text.body.data.id)
          .executeTakeFirstOrThrow();
        assert.equal(JSON.parse(row.content).text, 'signed ✓');
        const empty = await send({ method: 'POST', url: '/session/connect' });
        assert.equal(empty.status, 200);
      });

      it('missing or wrong signatures are 401 invalid request signature', async () => {
        const unsigned = await t.call('GET', '/session/status', undefined, {
          'x-instance-id': t.instance.id,
        });
        assert.deepEqual(unsigned.body, INVALID);
        const unsignedGarbage = await t.app.inject({
          method: 'POST',
          url: '/chat/send/text',
          headers: {
            authorization: `Bearer ${t.key}`,
            'x-instance-id': t.instance.id,
            'content-type': 'application/json',
          },
          payload: '{not json',
        });
        assert.deepEqual(unsignedGarbage.json(), INVALID, 'refused before the body is read');
        const ts = now();
        const good = sign(HMAC_KEY, ts, 'GET', '/session/status', '');
        const noTimestamp = await t.call('GET', '/session/status', undefined, {
          'x-instance-id': t.instance.id,
          'x-signature': good,
        });
        assert.deepEqual(noTimestamp.body, INVALID);
        const flipped = `${good.slice(0, -1)}${good.endsWith('0') ? '1' : '0'}`;
        assert.deepEqual(
          (await send({ method: 'GET', url: '/session/status', signature: flipped })).body,
          INVALID,
        );
        assert.deepEqual(
          (await send({ method: 'GET', url: '/session/status', signature: 'zz' })).body,
          INVALID,
        );
        assert.deepEqual(
          (await send({ method: 'GET', url: '/session/status', timestamp: 'soon', signature: good })).body,
          INVALID,
        );
        const wrongKey = sign('another-key-0123456789abcdef012345', ts, 'GET', '/session/status', '');
        assert.deepEqual(
          (await send({ method: 'GET', url: '/session/status', signature: wrongKey })).body,
          INVALID,
        );
        const otherQuery = sign(HMAC_KEY, ts, 'GET', `/user/info?phone=${PEER}`, '');
        const tampered = await send({
          method: 'GET',
          url: '/user/info?phone=5511999990004',
          signature: otherQuery,
        });
        assert.deepEqual(tampered.body, INVALID);
        const raw = `{"phone":"${PEER}","message":"one"}`;
        const bodySig = sign(HMAC_KEY, ts, 'POST', '/chat/send/text', raw);
        const swapped = await send({
          method: 'POST',
          url: '/chat/send/text',
          body: `{"phone":"${PEER}","message":"two"}`,
          signature: bodySig,
        });
        assert.deepEqual(swapped.body, INVALID);
        const respaced = await send({
          method: 'POST',
          url: '/chat/send/text',
          body: `{"phone": "${PEER}","message":"one"}`,
          signature: bodySig,
        });
        assert.deepEqual(respaced.body, INVALID, 'the raw bytes are signed, not the parsed JSON');
        const otherMethod = sign(HMAC_KEY, ts, 'POST', '/session/status', '');
        assert.deepEqual(
          (await send({ method: 'GET', url: '/session/status', signature: otherMethod })).body,
          INVALID,
        );
      });

      it('a timestamp more than 300 s from the server clock is refused', async () => {
        const at = Math.floor(t.clock() / 1000);
        assert.deepEqual(
          (await send({ method: 'GET', url: '/session/status', timestamp: String(at - 301) })).body,
          STALE,
        );
        assert.deepEqual(
          (await send({ method: 'GET', url: '/session/status', timestamp: String(at + 301) })).body,
          STALE,
        );
        const edge = await send({ method: 'GET', url: '/session/status', timestamp: String(at - 300) });
        assert.equal(edge.status, 200, 'exactly 300 s is inside the window');

        const ts = now();
        const signature = sign(HMAC_KEY, ts, 'GET', '/group/list', '');
        t.clock.advance(301_000);
        const late = await send({ method: 'GET', url: '/group/list', timestamp: ts, signature });
        assert.deepEqual(late.body, STALE);
      });

      it('a signature seen before within the window is refused, also by another process on the same store', async () => {
        t.clock.advance(1000); // a second no earlier test signed in
        const ts = now();
        const url = `/user/info?phone=${PEER}`;
        const first = await send({ method: 'GET', url, timestamp: ts });
        assert.equal(first.status, 200);
        assert.deepEqual((await send({ method: 'GET', url, timestamp: ts })).body, REPLAYED);

        const raw = `{"phone":"${PEER}","message":"once"}`;
        assert.equal(
          (await send({ method: 'POST', url: '/chat/send/text', body: raw, timestamp: ts })).status,
          200,
        );
        const again = await send({ method: 'POST', url: '/chat/send/text', body: raw, timestamp: ts });
        assert.deepEqual(again.body, REPLAYED);
        const sent = await t.services.store.db
          .selectFrom('messages')
          .select('id')
          .where('content', 'like', '%"once"%')
          .execute();
        assert.equal(sent.length, 1, 'the replay sent nothing');

        const other = await createTestApp({ ...options, testStore: t.testStore, clock: t.clock });
        try {
          const fresh = await send({ method: 'GET', url: '/group/list', timestamp: ts }, other.app);
          assert.equal(
            fresh.status,
            503,
            'the other process accepts a new signature (and has no session here: not connected right now)',
          );
          assert.deepEqual((await send({ method: 'GET', url: '/group/list', timestamp: ts })).body, REPLAYED);
          assert.deepEqual((await send({ method: 'GET', url, timestamp: ts }, other.app)).body, REPLAYED);
        } finally {
          await other.close();
        }

        if (variant.name === 'store') {
          const signature = sign(HMAC_KEY, ts, 'GET', url, '');
          const row = await t.services.store.db
            .selectFrom('gateway_replay')
            .selectAll()
            .where('signature', '=', signature)
            .executeTakeFirstOrThrow();
          assert.deepEqual(row, {
            instance_id: t.instance.id,
            signature,
            expires_at: (Number(ts) + 301) * 1000,
          });
        }
      });

      // The table variant only: Redis expires its keys by itself.
      if (variant.name === 'store')
        it('expired signatures are pruned from the store', async () => {
          const db = t.services.store.db;
          const before = await db.selectFrom('gateway_replay').select('signature').execute();
          assert.ok(before.length > 0);
          t.clock.advance(10 * 60_000);
          assert.equal((await send({ method: 'GET', url: '/session/status' })).status, 200);
          const left = await db.selectFrom('gateway_replay').selectAll().execute();
          assert.equal(left.length, 1, 'only the signature just used is left');
          assert.equal(left[0]?.expires_at, (Math.floor(t.clock() / 1000) + 301) * 1000);
        });

      it('only gateway requests of an instance with an HMAC key are checked', async () => {
        assert.equal((await t.call('GET', '/v1/session/status')).status, 200, '/v1 twins need no signature');
        const plain = await t.newInstance('test', 'unsigned');
        const unsigned = await t.call('GET', '/session/status', undefined, { 'x-instance-id': plain.id });
        assert.equal(unsigned.status, 200);
        assert.equal(unsigned.body.data.instanceId, plain.id);
        assert.equal((await t.call('DELETE', '/v1/session/hmac/config')).status, 200);
        const afterRemoval = await t.call('GET', '/session/status', undefined, {
          'x-instance-id': t.instance.id,
        });
        assert.equal(afterRemoval.status, 200);
      });
    });
  }
}
