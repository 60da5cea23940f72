/**
 * What the webhook endpoint suites share (docs/decisions/0035-webhook-endpoints.md): an endpoint created through the
 * API, the Standard Webhooks signature recomputed with node:crypto and checked with `standardwebhooks`, and readers
 * of what a receiver got.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { EngineEvent, MessageSource } from '../../src/domain/messages.ts';
import type { TestApp } from '../support/app.ts';
import type { ReceivedRequest, Receiver } from '../support/https-receiver.ts';

/** An ISO 8601 time in UTC with milliseconds, as the API writes times. */
export const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** The peer a receipt comes from. */
const source: MessageSource = {
  chat: '5511988880002@s.whatsapp.net',
  sender: '5511988880002@s.whatsapp.net',
  isFromMe: false,
  isGroup: false,
};

/** A read receipt (webhook type ReadReceipt). */
export function receipt(id: string): EngineEvent {
  return { type: 'receipt', state: 'read', messageIds: [id], source, timestamp: Date.UTC(2025, 0, 2) };
}

/** The Standard Webhooks signature of `request` under `secret` (`whsec_…`), recomputed with node:crypto. */
export function expectedSignature(request: ReceivedRequest, secret: string): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const id = String(request.headers['webhook-id']);
  const timestamp = String(request.headers['webhook-timestamp']);
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(request.body).digest('base64');
  return `v1,${mac}`;
}

/** Asserts `request` verifies with `secret` (node:crypto and standardwebhooks) and carries no x-hmac-signature. */
export function assertEndpointSigned(request: ReceivedRequest, secret: string): void {
  assert.equal(request.headers['webhook-signature'], expectedSignature(request, secret));
  assert.equal(request.headers['x-hmac-signature'], undefined);
  const parsed = new Webhook(secret).verify(request.body.toString('utf8'), {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  });
  assert.deepEqual(parsed, JSON.parse(request.body.toString('utf8')));
}

/**
 * Asserts `request` carries exactly one `v1,` signature per secret of `secrets`, in that order, space-separated
 * (Standard Webhooks; docs/decisions/0094-secret-rotation-grace.md), each recomputed with node:crypto, that
 * `standardwebhooks` verifies it with each secret, and that it carries no x-hmac-signature.
 */
export function assertSignedWithEach(request: ReceivedRequest, secrets: readonly string[]): void {
  const header = String(request.headers['webhook-signature']);
  assert.deepEqual(
    header.split(' '),
    secrets.map((secret) => expectedSignature(request, secret)),
  );
  assert.equal(request.headers['x-hmac-signature'], undefined);
  for (const secret of secrets) {
    const parsed = new Webhook(secret).verify(request.body.toString('utf8'), {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': header,
    });
    assert.deepEqual(parsed, JSON.parse(request.body.toString('utf8')));
  }
}

/** Asserts no `v1,` entry of `request`'s `webhook-signature` is the signature under `secret` (node:crypto). */
export function assertNoEntryOf(request: ReceivedRequest, secret: string): void {
  const entries = String(request.headers['webhook-signature']).split(' ');
  assert.ok(
    !entries.includes(expectedSignature(request, secret)),
    'signed with a secret that should not sign',
  );
}

/** Asserts `request` does not verify with `secret`. */
export function assertNotSignedWith(request: ReceivedRequest, secret: string): void {
  assert.notEqual(request.headers['webhook-signature'], expectedSignature(request, secret));
  assert.throws(() =>
    new Webhook(secret).verify(request.body.toString('utf8'), {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    }),
  );
}

/** The webhook body's `type`. */
export function typeOf(request: ReceivedRequest): string {
  return JSON.parse(request.body.toString('utf8')).type;
}

/** The text of a Message webhook body. */
export function textOf(request: ReceivedRequest): string {
  return JSON.parse(request.body.toString('utf8')).event.message.conversation;
}

/** Requests answered 2xx. */
export function accepted(receiver: Receiver): ReceivedRequest[] {
  return receiver.requests.filter((r) => r.reply.status !== undefined && r.reply.status < 300);
}

/** Polls until `predicate` holds, waking the worker each time; fails after `timeoutMs`. */
export async function until(
  t: TestApp,
  what: string,
  predicate: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    t.services.webhooks.wake();
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.fail(`not met within ${timeoutMs} ms: ${what}`);
}

/** Creates an endpoint through the API, asserting 201. */
export async function createEndpoint(t: TestApp, body: Record<string, unknown>, query = '') {
  const response = await t.call('POST', `/v1/webhooks${query}`, body);
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.data;
}
