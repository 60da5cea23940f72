import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { Headers as UndiciHeaders } from 'undici';
import { hmacHex, webhookHeaders } from '../../src/webhooks/signing.ts';
import { verifyHmacSignature, verifyStandardSignature } from '../../src/webhooks/verify.ts';
import { loginSandbox } from '../support/app.ts';
import { builtClient, type ClientModule } from '../support/client.ts';
import { startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { createWebhookApp, HMAC_KEY, textMessage } from '../webhooks/support.ts';

/**
 * verifyWebhook of @parley/client (built as shipped) accepts what parley signs (src/webhooks/signing.ts, a real
 * delivery over HTTPS) and what the `standardwebhooks` package signs, and refuses what it must
 * (docs/decisions/0006-signatures.md): another body, another signature, another key, a timestamp more than 5 minutes
 * away, a missing header. parley's own verifier (src/webhooks/verify.ts, used by `parley listen`) agrees.
 */

const BODY = JSON.stringify({
  type: 'Message',
  event: { info: { id: '3EB0C431C26A1916E07A' }, message: { conversation: 'Olá, é hoje?' } },
  instanceId: '0b6f3c3e-8f2a-4d1e-9c55-2f1d7a9e4b10',
  sequence: 42,
});
const ID = '6f1c2a9e-8a51-4c1e-9d6b-0b7f3e1d2c4a';
const NOW_S = 1_767_225_600; // 2026-01-01T00:00:00Z

/** The headers parley sends for `body` signed at `seconds` with `key`. */
function signed(body = BODY, seconds = NOW_S, key = HMAC_KEY): Record<string, string> {
  return webhookHeaders({ id: ID, timestampSeconds: seconds, body, hmacKey: key });
}

/** What parley's own verifier says about the request: valid when both checks pass. */
function parleyVerdict(body: string, headers: Record<string, string>, key = HMAC_KEY): boolean {
  const bytes = Buffer.from(body, 'utf8');
  return (
    verifyHmacSignature(key, bytes, headers['x-hmac-signature']).valid &&
    verifyStandardSignature(
      key,
      bytes,
      {
        'webhook-id': headers['webhook-id'],
        'webhook-timestamp': headers['webhook-timestamp'],
        'webhook-signature': headers['webhook-signature'],
      },
      NOW_S,
    ).valid
  );
}

describe('verifyWebhook (@parley/client)', () => {
  let client: ClientModule;
  before(async () => {
    client = (await builtClient()).module;
  });

  it('accepts a request parley signed, and returns its id, timestamp and event', async () => {
    const verified = await client.verifyWebhook({
      body: BODY,
      headers: signed(),
      hmacKey: HMAC_KEY,
      now: NOW_S * 1000,
    });
    assert.deepEqual(verified, { id: ID, timestamp: NOW_S, payload: JSON.parse(BODY) });
    assert.equal(parleyVerdict(BODY, signed()), true);
  });

  it('takes the body as text, bytes or ArrayBuffer, and headers as Headers or a record in any case', async () => {
    const headers = signed();
    const bytes = new TextEncoder().encode(BODY);
    const mixed: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(headers)) mixed[name.toUpperCase()] = [value];
    for (const input of [
      { body: bytes, headers: new Headers(headers) },
      { body: bytes.buffer.slice(0), headers: mixed },
      { body: Buffer.from(BODY), headers },
    ]) {
      const verified = await client.verifyWebhook({
        ...input,
        hmacKey: HMAC_KEY,
        now: new Date(NOW_S * 1000),
      });
      assert.equal(verified.payload.sequence, 42);
    }
  });

  it("reads a Headers object of another package (undici's), or anything with get()", async () => {
    const headers = signed();
    const record = new Map(Object.entries(headers));
    for (const given of [
      new UndiciHeaders(headers),
      { get: (name: string) => record.get(name.toLowerCase()) ?? null },
    ]) {
      const verified = await client.verifyWebhook({
        body: BODY,
        headers: given,
        hmacKey: HMAC_KEY,
        now: NOW_S * 1000,
      });
      assert.equal(verified.id, ID);
    }
    const unsigned = new UndiciHeaders(headers);
    unsigned.delete('x-hmac-signature');
    await assert.rejects(
      client.verifyWebhook({ body: BODY, headers: unsigned, hmacKey: HMAC_KEY, now: NOW_S * 1000 }),
      { name: 'WebhookVerificationError', message: 'x-hmac-signature is missing' },
    );
  });

  it('keys with non-ASCII characters are used as their UTF-8 bytes, as parley signs', async () => {
    const key = 'clé-secrète-ключ-0123456789-abcdefghij';
    const verified = await client.verifyWebhook({
      body: BODY,
      headers: signed(BODY, NOW_S, key),
      hmacKey: new TextEncoder().encode(key),
      now: NOW_S * 1000,
    });
    assert.equal(verified.id, ID);
  });

  it("accepts the standardwebhooks package's signature, with the key as a whsec_ secret", async () => {
    const secret = `whsec_${Buffer.from(HMAC_KEY, 'utf8').toString('base64')}`;
    const signature = new Webhook(secret).sign(ID, new Date(NOW_S * 1000), BODY);
    const headers = {
      'webhook-id': ID,
      'webhook-timestamp': String(NOW_S),
      'webhook-signature': signature,
      'x-hmac-signature': hmacHex(HMAC_KEY, BODY),
    };
    assert.equal(signature, signed()['webhook-signature'], 'the package signs as parley does');
    const verified = await client.verifyWebhook({ body: BODY, headers, secret, now: NOW_S * 1000 });
    assert.equal(verified.id, ID);
  });

  it('accepts a matching v1 entry among several (a rotated key) and ignores other versions', async () => {
    const headers = signed();
    const other = signed(BODY, NOW_S, 'another-key-of-at-least-32-characters!!')['webhook-signature'];
    headers['webhook-signature'] = `v2,abc ${other} ${headers['webhook-signature']}`;
    assert.equal(
      (await client.verifyWebhook({ body: BODY, headers, hmacKey: HMAC_KEY, now: NOW_S * 1000 })).id,
      ID,
    );
    assert.equal(parleyVerdict(BODY, headers), true);
  });

  it('refuses tampering, another key, timestamps more than 5 minutes away and missing headers, naming the reason', async () => {
    const tampered = BODY.replace('42', '43');
    const hex = signed();
    hex['x-hmac-signature'] = hmacHex(HMAC_KEY, tampered);
    const cases: [string, string, Record<string, string>, string, number][] = [
      ['another body', tampered, signed(), 'webhook-signature does not match the body', NOW_S],
      ['another x-hmac-signature', BODY, hex, 'x-hmac-signature does not match the body', NOW_S],
      [
        'another key',
        BODY,
        signed(BODY, NOW_S, 'not-the-key-but-32-characters-long!!'),
        'webhook-signature does not match the body',
        NOW_S,
      ],
      [
        '301 s old',
        BODY,
        signed(BODY, NOW_S - 301),
        'webhook-timestamp is more than 300 seconds from this clock',
        NOW_S,
      ],
      [
        '301 s ahead',
        BODY,
        signed(BODY, NOW_S + 301),
        'webhook-timestamp is more than 300 seconds from this clock',
        NOW_S,
      ],
      ...(['webhook-id', 'webhook-timestamp', 'webhook-signature', 'x-hmac-signature'] as const).map(
        (name): [string, string, Record<string, string>, string, number] => {
          const headers = signed();
          delete headers[name];
          return [
            `no ${name}`,
            BODY,
            headers,
            name === 'webhook-timestamp' ? `${name} is missing or not Unix seconds` : `${name} is missing`,
            NOW_S,
          ];
        },
      ),
    ];
    for (const [what, body, headers, reason, now] of cases) {
      const error = await client.verifyWebhook({ body, headers, hmacKey: HMAC_KEY, now: now * 1000 }).then(
        () => assert.fail(`${what}: accepted`),
        (e: unknown) => e,
      );
      assert.ok(error instanceof client.WebhookVerificationError, `${what}: ${String(error)}`);
      assert.equal(error.message, reason, what);
      assert.equal(parleyVerdict(body, headers), false, `${what}: parley's verifier refuses it too`);
    }
    // the edge of the tolerance is accepted, as parley's verifier does
    const edge = signed(BODY, NOW_S - 300);
    await client.verifyWebhook({ body: BODY, headers: edge, hmacKey: HMAC_KEY, now: NOW_S * 1000 });
    assert.equal(parleyVerdict(BODY, edge), true);
  });

  it('needs exactly one of hmacKey and secret', async () => {
    for (const keys of [{}, { hmacKey: HMAC_KEY, secret: 'whsec_YQ==' }, { secret: 'not-whsec' }]) {
      await assert.rejects(client.verifyWebhook({ body: BODY, headers: signed(), ...keys }), TypeError);
    }
  });

  it('refuses an empty key with a TypeError naming it, before reading the request', async () => {
    for (const hmacKey of ['', new Uint8Array(0)]) {
      await assert.rejects(client.verifyWebhook({ body: BODY, headers: {}, hmacKey }), {
        name: 'TypeError',
        message: 'hmacKey must not be empty',
      });
    }
    for (const secret of ['', 'whsec_']) {
      await assert.rejects(client.verifyWebhook({ body: BODY, headers: {}, secret }), {
        name: 'TypeError',
        message: 'secret must be whsec_ followed by the base64 of the HMAC key',
      });
    }
  });
});

describe("verifyWebhook (@parley/client) of a webhook endpoint's request, with its whsec_ secret", () => {
  let client: ClientModule;
  before(async () => {
    client = (await builtClient()).module;
  });

  /** An endpoint secret as POST /v1/webhooks answers it: whsec_ and the base64 of 32 bytes. */
  const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef', 'utf8').toString('base64')}`;
  /** The headers parley sends to the endpoint for `body` signed at `seconds` with `secret`. */
  const endpointSigned = (body = BODY, seconds = NOW_S, secret = SECRET) =>
    webhookHeaders({ id: ID, timestampSeconds: seconds, body, hmacKey: null, endpointSecret: secret });

  it('accepts what parley signs, the HMAC docs/api.md describes, as standardwebhooks does', async () => {
    const headers = endpointSigned();
    assert.equal(headers['x-hmac-signature'], undefined, 'an endpoint request carries no x-hmac-signature');
    // docs/api.md "Webhook endpoints": HMAC-SHA256 of `${id}.${timestamp}.${body}`, keyed by the base64 part decoded
    const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
    const mac = createHmac('sha256', key).update(`${ID}.${NOW_S}.${BODY}`).digest('base64');
    assert.equal(headers['webhook-signature'], `v1,${mac}`);
    assert.deepEqual(await client.verifyWebhook({ body: BODY, headers, secret: SECRET, now: NOW_S * 1000 }), {
      id: ID,
      timestamp: NOW_S,
      payload: JSON.parse(BODY),
    });

    // signed now, so the standardwebhooks package (which reads the real clock) checks the same request
    const nowSeconds = Math.floor(Date.now() / 1000);
    const fresh = endpointSigned(BODY, nowSeconds);
    assert.deepEqual(new Webhook(SECRET).verify(BODY, fresh), JSON.parse(BODY));
    assert.equal(
      (await client.verifyWebhook({ body: BODY, headers: new Headers(fresh), secret: SECRET })).id,
      ID,
    );
  });

  it("with the instance's HMAC key as a secret, x-hmac-signature is checked when present, not required", async () => {
    const secret = `whsec_${Buffer.from(HMAC_KEY, 'utf8').toString('base64')}`;
    const headers = signed();
    assert.equal((await client.verifyWebhook({ body: BODY, headers, secret, now: NOW_S * 1000 })).id, ID);
    const { 'x-hmac-signature': _, ...withoutHex } = headers;
    assert.equal(
      (await client.verifyWebhook({ body: BODY, headers: withoutHex, secret, now: NOW_S * 1000 })).id,
      ID,
    );
  });

  it('refuses another body, secret or time, no webhook-signature, a wrong x-hmac-signature', async () => {
    const tampered = BODY.replace('42', '43');
    const { 'webhook-signature': _, ...unsigned } = endpointSigned();
    const cases: [string, string, Record<string, string>, string][] = [
      ['another body', tampered, endpointSigned(), 'webhook-signature does not match the body'],
      [
        'another secret',
        BODY,
        endpointSigned(
          BODY,
          NOW_S,
          `whsec_${Buffer.from('another-32-byte-endpoint-secret!').toString('base64')}`,
        ),
        'webhook-signature does not match the body',
      ],
      [
        '301 s old',
        BODY,
        endpointSigned(BODY, NOW_S - 301),
        'webhook-timestamp is more than 300 seconds from this clock',
      ],
      ['no webhook-signature', BODY, unsigned, 'webhook-signature is missing'],
      [
        'an x-hmac-signature of another body',
        BODY,
        { ...endpointSigned(), 'x-hmac-signature': hmacHex(HMAC_KEY, BODY) },
        'x-hmac-signature does not match the body',
      ],
    ];
    for (const [what, body, headers, reason] of cases) {
      const error = await client.verifyWebhook({ body, headers, secret: SECRET, now: NOW_S * 1000 }).then(
        () => assert.fail(`${what}: accepted`),
        (e: unknown) => e,
      );
      assert.ok(error instanceof client.WebhookVerificationError, `${what}: ${String(error)}`);
      assert.equal(error.message, reason, what);
    }
    // the endpoint's secret given as an hmacKey still requires x-hmac-signature, which an endpoint never sends
    await assert.rejects(
      client.verifyWebhook({ body: BODY, headers: endpointSigned(), hmacKey: HMAC_KEY, now: NOW_S * 1000 }),
      { name: 'WebhookVerificationError', message: 'x-hmac-signature is missing' },
    );
  });
});

for (const dialect of testDialects()) {
  describe(`verifyWebhook on a real delivery (${dialect})`, () => {
    let client: ClientModule;
    before(async () => {
      client = (await builtClient()).module;
    });

    it('accepts the request parley posted over HTTPS; its event is the event log entry without createdAt', async () => {
      const receiver = await startReceiver();
      const t = await createWebhookApp({ dialect });
      after(async () => {
        await t.close();
        await receiver.close();
      });
      await loginSandbox(t);
      const baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key });
      assert.deepEqual(await parley.webhook.setHmacKey(HMAC_KEY), { details: 'HMAC key configured' });
      assert.deepEqual(await parley.webhook.set({ webhookUrl: receiver.url }), { webhook: receiver.url });
      const config = await parley.webhook.get();
      assert.equal(config.webhook, receiver.url);
      assert.equal(config.disabled, false);
      const seen = receiver.requests.length;
      await t.services.recorder.record(t.instance.id, textMessage('signed for the client'));
      const [request] = (await receiver.waitForCount(seen + 1, 10_000)).slice(seen);
      assert.ok(request);
      const verified = await client.verifyWebhook({
        body: request.body,
        headers: request.headers,
        hmacKey: HMAC_KEY,
        now: t.clock(),
      });
      assert.equal(verified.id, request.headers['webhook-id']);
      assert.equal(verified.payload.type, 'Message');
      const { events } = await parley.eventsPage({ after: verified.payload.sequence - 1, limit: 1 });
      const [{ createdAt, ...logged } = { createdAt: '' }] = events;
      assert.match(createdAt, /Z$/);
      assert.deepEqual(logged, verified.payload);

      const late = client.verifyWebhook({
        body: request.body,
        headers: request.headers,
        hmacKey: HMAC_KEY,
        now: t.clock() + 301_000,
      });
      await assert.rejects(late, { name: 'WebhookVerificationError' });
      assert.deepEqual(await parley.webhook.remove(), { details: 'Webhook removed' });
      assert.equal((await parley.webhook.get()).webhook, '');
    });

    it('accepts what parley posted to a webhook endpoint, with its secret; patch() disables it', async () => {
      const receiver = await startReceiver();
      const t = await createWebhookApp({ dialect });
      after(async () => {
        await t.close();
        await receiver.close();
      });
      await loginSandbox(t);
      const baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
      const parley = client.createParleyClient({ baseUrl, apiKey: t.key });
      const endpoint = await parley.post('/v1/webhooks', {
        body: { url: receiver.url, events: ['Message'] },
      });
      assert.match(endpoint.secret, /^whsec_/);
      await t.services.recorder.record(t.instance.id, textMessage('signed for an endpoint'));
      const [request] = await receiver.waitFor(
        (requests) => requests.some((r) => r.body.includes('signed for an endpoint')),
        10_000,
      );
      assert.ok(request);
      assert.equal(
        request.headers['x-hmac-signature'],
        undefined,
        'an endpoint request carries one signature',
      );
      const verified = await client.verifyWebhook({
        body: request.body,
        headers: request.headers,
        secret: endpoint.secret,
        now: t.clock(),
      });
      assert.equal(verified.id, request.headers['webhook-id']);
      assert.equal(verified.payload.type, 'Message');
      await assert.rejects(
        client.verifyWebhook({
          body: request.body,
          headers: request.headers,
          secret: `whsec_${Buffer.from('not-the-endpoint-secret-32-bytes').toString('base64')}`,
          now: t.clock(),
        }),
        { name: 'WebhookVerificationError', message: 'webhook-signature does not match the body' },
      );

      const disabled = await parley.patch('/v1/webhooks/{id}', {
        path: { id: endpoint.id },
        body: { enabled: false },
      });
      assert.equal(disabled.enabled, false);
      assert.equal((await parley.get('/v1/webhooks/{id}', { path: { id: endpoint.id } })).enabled, false);
    });
  });
}
