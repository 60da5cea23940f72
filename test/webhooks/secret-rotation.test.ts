import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { previousSecretSigning } from '../../src/webhooks/sending.ts';
import { webhookHeaders } from '../../src/webhooks/signing.ts';
import type { TestApp } from '../support/app.ts';
import { type ReceivedRequest, type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import {
  assertEndpointSigned,
  assertNoEntryOf,
  assertSignedWithEach,
  createEndpoint,
  expectedSignature,
  textOf,
  until,
} from './endpoint-support.ts';
import { createWebhookApp, textMessage } from './support.ts';

/**
 * Secret rotation with a grace (docs/decisions/0094-secret-rotation-grace.md, docs/api.md#webhook-endpoints): after
 * `rotate-secret` every attempt to the endpoint is signed with the new secret and, until the grace ends (24 hours by
 * default, `previousSecretGraceSeconds` otherwise), with the replaced one, two space-separated `v1,` entries in
 * `webhook-signature`, the new one first; each checked at a real HTTPS receiver with node:crypto and with
 * `standardwebhooks`. A second rotation within the grace keeps only the secret it replaces; a grace of 0 keeps none.
 * The endpoint's GET answers when the replaced secret stops signing, never a secret.
 */

const DAY_MS = 86_400_000;
const RULE =
  'previousSecretGraceSeconds must be an integer from 0 to 604800 (seconds; 0 ends the old secret at once)';

/** A new `whsec_` secret for the unit tests. */
function secret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

describe('signing with a rotated-out secret (docs/decisions/0094-secret-rotation-grace.md)', () => {
  it('webhookHeaders: the current secret’s v1 entry, then the previous one’s; standardwebhooks verifies each', () => {
    const [current, previous] = [secret(), secret()];
    const body = '{"type":"Message","sequence":1}';
    const timestampSeconds = Math.floor(Date.now() / 1000);
    const headers = webhookHeaders({
      id: 'evt-1',
      timestampSeconds,
      body,
      hmacKey: null,
      endpointSecret: current,
      previousEndpointSecret: previous,
    });
    const at = new Date(timestampSeconds * 1000);
    assert.equal(
      headers['webhook-signature'],
      `${new Webhook(current).sign('evt-1', at, body)} ${new Webhook(previous).sign('evt-1', at, body)}`,
    );
    for (const key of [current, previous])
      assert.deepEqual(new Webhook(key).verify(body, headers), JSON.parse(body));
    assert.throws(() => new Webhook(secret()).verify(body, headers));
    assert.equal(headers['x-hmac-signature'], undefined);
  });

  it('previousSecretSigning: the previous secret signs an attempt started before its expiry, never at or after', () => {
    const delivery = {
      endpointSecretSealed: 'now',
      previousSecretSealed: 'before',
      previousSecretExpiresAt: 1_000,
    };
    assert.equal(previousSecretSigning(delivery, 999), 'before');
    assert.equal(previousSecretSigning(delivery, 1_000), null);
    assert.equal(previousSecretSigning({ ...delivery, previousSecretSealed: null }, 0), null);
    assert.equal(previousSecretSigning({ ...delivery, previousSecretExpiresAt: null }, 0), null);
    // The default webhook (no endpoint secret) never carries one.
    assert.equal(previousSecretSigning({ ...delivery, endpointSecretSealed: null }, 0), null);
  });
});

for (const dialect of testDialects()) {
  describe(`webhook endpoint secret rotation (${dialect})`, () => {
    let receiver: Receiver;
    let t: TestApp;
    beforeEach(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({ dialect });
    });
    afterEach(async () => {
      await t.close();
      await receiver.close();
    });

    /** Records a message and waits for the endpoint's request carrying it. */
    async function deliver(text: string): Promise<ReceivedRequest> {
      await t.services.recorder.record(t.instance.id, textMessage(text));
      await until(t, `${text} delivered`, () => receiver.requests.some((r) => textOf(r) === text));
      const request = receiver.requests.find((r) => textOf(r) === text);
      assert.ok(request);
      return request;
    }

    /** The endpoint's `previousSecretExpiresAt` as its GET answers it. */
    async function expiresAt(id: string): Promise<string | null> {
      const response = await t.call('GET', `/v1/webhooks/${id}`);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.doesNotMatch(JSON.stringify(response.body), /whsec_/);
      return response.body.data.previousSecretExpiresAt;
    }

    /** Rotates endpoint `id`'s secret with `body`, asserting 200; the new secret. */
    async function rotate(id: string, body?: Record<string, unknown>): Promise<string> {
      const response = await t.call('POST', `/v1/webhooks/${id}/rotate-secret`, body);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.match(response.body.data.secret, /^whsec_/);
      return response.body.data.secret;
    }

    it('rotate-secret: the new secret and the old one sign for 24 hours, then the new one only', async () => {
      const endpoint = await createEndpoint(t, { url: receiver.url, events: ['Message'] });
      assert.equal(endpoint.previousSecretExpiresAt, null);
      assertEndpointSigned(await deliver('before'), endpoint.secret);

      const rotatedAt = t.clock();
      const rotated = await t.call('POST', `/v1/webhooks/${endpoint.id}/rotate-secret`);
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      const fresh: string = rotated.body.data.secret;
      const until24h = new Date(rotatedAt + DAY_MS).toISOString();
      assert.equal(rotated.body.data.previousSecretExpiresAt, until24h);
      assert.equal(await expiresAt(endpoint.id), until24h);
      const listed = (await t.call('GET', '/v1/webhooks')).body.data.endpoints;
      assert.deepEqual(
        listed.map((e: { previousSecretExpiresAt: string | null }) => e.previousSecretExpiresAt),
        [until24h],
      );

      // A receiver holding either secret verifies: node:crypto and standardwebhooks, each with each secret.
      assertSignedWithEach(await deliver('during'), [fresh, endpoint.secret]);

      // The last millisecond of the grace still signs with both; its end with the new secret only.
      t.clock.set(rotatedAt + DAY_MS - 1);
      const last = await deliver('last');
      assert.equal(last.headers['webhook-timestamp'], String(Math.floor((rotatedAt + DAY_MS - 1) / 1000)));
      assert.equal(
        last.headers['webhook-signature'],
        `${expectedSignature(last, fresh)} ${expectedSignature(last, endpoint.secret)}`,
      );
      t.clock.set(rotatedAt + DAY_MS);
      assert.equal(await expiresAt(endpoint.id), null);
      // Its timestamp is a day from this machine's clock, past standardwebhooks' 5 minutes: node:crypto only.
      const after = await deliver('after');
      assert.equal(after.headers['webhook-signature'], expectedSignature(after, fresh));
      assertNoEntryOf(after, endpoint.secret);
    });

    it('a second rotation keeps only the secret it replaces; grace 0 keeps none; a set grace ends then', async () => {
      const endpoint = await createEndpoint(t, { url: receiver.url, events: ['Message'] });
      const first = await rotate(endpoint.id);
      t.clock.advance(1_000);
      const secondAt = t.clock();
      const second = await rotate(endpoint.id, {});
      assert.equal(await expiresAt(endpoint.id), new Date(secondAt + DAY_MS).toISOString());
      const twice = await deliver('twice');
      assertSignedWithEach(twice, [second, first]);
      assertNoEntryOf(twice, endpoint.secret);

      const third = await rotate(endpoint.id, { previousSecretGraceSeconds: 0 });
      assert.equal(await expiresAt(endpoint.id), null);
      const leaked = await deliver('leaked');
      assertEndpointSigned(leaked, third);
      assertNoEntryOf(leaked, second);
      assertNoEntryOf(leaked, first);

      const fourthAt = t.clock();
      const fourth = await rotate(endpoint.id, { previousSecretGraceSeconds: 60 });
      assert.equal(await expiresAt(endpoint.id), new Date(fourthAt + 60_000).toISOString());
      assertSignedWithEach(await deliver('minute'), [fourth, third]);
      t.clock.advance(60_000);
      assert.equal(await expiresAt(endpoint.id), null);
      const over = await deliver('over');
      assertEndpointSigned(over, fourth);
      assertNoEntryOf(over, third);
    });

    it('previousSecretGraceSeconds other than an integer from 0 to 604800: 400 naming it, secret kept', async () => {
      const endpoint = await createEndpoint(t, { url: receiver.url, events: ['Message'] });
      for (const value of [-1, 604_801, 1.5, '60', null, true]) {
        const response = await t.call('POST', `/v1/webhooks/${endpoint.id}/rotate-secret`, {
          previousSecretGraceSeconds: value,
        });
        assert.equal(response.status, 400, `${JSON.stringify(value)}: ${JSON.stringify(response.body)}`);
        assert.equal(response.body.error.message, RULE, JSON.stringify(value));
      }
      assert.equal(await expiresAt(endpoint.id), null);
      assertEndpointSigned(await deliver('kept'), endpoint.secret);

      const weekAt = t.clock();
      const week = await rotate(endpoint.id, { previousSecretGraceSeconds: 604_800 });
      assert.equal(await expiresAt(endpoint.id), new Date(weekAt + 7 * DAY_MS).toISOString());
      assertSignedWithEach(await deliver('week'), [week, endpoint.secret]);
    });
  });
}
