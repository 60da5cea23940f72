import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { inspectDelivery } from '../../src/cli/listen.ts';
import { verifyHmacSignature, verifyStandardSignature } from '../../src/webhooks/verify.ts';

const KEY = 'a-webhook-key-of-at-least-32-characters-é';
const BODY = Buffer.from('{"type":"Message","event":{"info":{"id":"X"}},"instanceId":"i","sequence":1}');
const ID = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W';
const NOW = 1_767_225_600;

/** Signs as a Standard Webhooks sender would (the npm package, key as raw UTF-8 bytes). */
function standardHeader(body: Buffer, timestampSeconds = NOW, key = KEY): string {
  return new Webhook(new TextEncoder().encode(key), { format: 'raw' }).sign(
    ID,
    new Date(timestampSeconds * 1000),
    body.toString('utf8'),
  );
}

const headers = (signature: string | undefined, timestamp = String(NOW)) => ({
  'webhook-id': ID,
  'webhook-timestamp': timestamp,
  'webhook-signature': signature,
});

describe('webhook signature verification (Standard Webhooks; x-hmac-signature)', () => {
  it('accepts x-hmac-signature computed independently with node:crypto, refuses another body or key', () => {
    const hex = createHmac('sha256', Buffer.from(KEY, 'utf8')).update(BODY).digest('hex');
    assert.deepEqual(verifyHmacSignature(KEY, BODY, hex), { valid: true });
    assert.deepEqual(verifyHmacSignature(KEY, BODY, hex.toUpperCase()), { valid: true });
    const other = Buffer.concat([BODY, Buffer.from(' ')]);
    assert.deepEqual(verifyHmacSignature(KEY, other, hex), {
      valid: false,
      reason: 'x-hmac-signature does not match the body',
    });
    assert.equal(verifyHmacSignature(`${KEY}x`, BODY, hex).valid, false);
    assert.deepEqual(verifyHmacSignature(KEY, BODY, undefined), {
      valid: false,
      reason: 'x-hmac-signature is missing',
    });
  });

  it('accepts what the standardwebhooks package signs, among several entries; refuses tampering', () => {
    const signature = standardHeader(BODY);
    assert.match(signature, /^v1,[A-Za-z0-9+/]+=*$/);
    assert.deepEqual(verifyStandardSignature(KEY, BODY, headers(signature), NOW), { valid: true });
    assert.deepEqual(verifyStandardSignature(KEY, BODY, headers(`v1,AAAA ${signature} v2,zzz`), NOW + 299), {
      valid: true,
    });
    const tampered = Buffer.from(BODY.toString().replace('"sequence":1', '"sequence":2'));
    assert.deepEqual(verifyStandardSignature(KEY, tampered, headers(signature), NOW), {
      valid: false,
      reason: 'webhook-signature does not match the body',
    });
    assert.equal(
      verifyStandardSignature(KEY, BODY, { ...headers(signature), 'webhook-id': 'other' }, NOW).valid,
      false,
    );
    assert.equal(
      verifyStandardSignature(KEY, BODY, headers(signature.slice(3)), NOW).valid,
      false,
      'no v1, prefix',
    );
  });

  it('refuses a timestamp more than 300 seconds away (replay) and malformed or missing headers', () => {
    const signature = standardHeader(BODY, NOW - 301);
    assert.deepEqual(verifyStandardSignature(KEY, BODY, headers(signature, String(NOW - 301)), NOW), {
      valid: false,
      reason: 'webhook-timestamp is more than 300 seconds from this clock',
    });
    assert.equal(
      verifyStandardSignature(KEY, BODY, headers(standardHeader(BODY, NOW + 301), String(NOW + 301)), NOW)
        .valid,
      false,
    );
    assert.deepEqual(verifyStandardSignature(KEY, BODY, headers(signature, '17e8'), NOW), {
      valid: false,
      reason: 'webhook-timestamp is missing or not Unix seconds',
    });
    assert.deepEqual(verifyStandardSignature(KEY, BODY, headers(undefined), NOW), {
      valid: false,
      reason: 'webhook-signature is missing',
    });
  });

  it('parley listen marks a request verified only when both signatures match', () => {
    const hex = createHmac('sha256', Buffer.from(KEY, 'utf8')).update(BODY).digest('hex');
    const all: Record<string, string> = {
      'x-hmac-signature': hex,
      'webhook-id': ID,
      'webhook-timestamp': String(NOW),
      'webhook-signature': standardHeader(BODY),
    };
    const ok = inspectDelivery(KEY, BODY, (name) => all[name], NOW);
    assert.deepEqual(ok, {
      verified: true,
      webhookId: ID,
      webhookTimestamp: NOW,
      payload: JSON.parse(BODY.toString()),
    });
    const forged: Record<string, string> = {
      ...all,
      'x-hmac-signature': hex.replace(/^./, hex[0] === '0' ? '1' : '0'),
    };
    assert.deepEqual(
      inspectDelivery(KEY, BODY, (name) => forged[name], NOW),
      {
        verified: false,
        error: 'x-hmac-signature does not match the body',
        webhookId: ID,
        webhookTimestamp: NOW,
        payload: JSON.parse(BODY.toString()),
      },
    );
    const unsigned = inspectDelivery(KEY, Buffer.from('not json'), () => undefined, NOW);
    assert.deepEqual(unsigned, {
      verified: false,
      error: 'x-hmac-signature is missing; webhook-id is missing',
      webhookId: null,
      webhookTimestamp: null,
      payload: 'not json',
    });
  });
});
