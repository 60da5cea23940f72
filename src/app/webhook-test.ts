import { randomUUID } from 'node:crypto';
import type { Clock } from '../domain/clock.ts';
import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { OutboundError, type OutboundGuard } from '../net/outbound-guard.ts';
import type { SecretBox } from '../security/secrets.ts';
import { webhookHeaders } from '../webhooks/signing.ts';

/** What the receiver made of a test event: its status code, duration (ms), the error and the first 2 KB answered. */
export interface TestDelivery {
  id: string;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
}

const RESPONSE_BYTES = 2048;

/**
 * "Send a test event" (docs/decisions/0022-dashboard.md): one POST to the instance's webhook URL, built, signed (when
 * an HMAC key is set) and sent exactly like a delivery (the headers of docs/decisions/0006-signatures.md, the
 * outbound guard, 15 s), with the body `{"type":"Test","event":{"message":…},"instanceId":…,"sequence":0}`. It is not
 * recorded in the delivery log and not retried: the answer is returned to the caller.
 */
export class WebhookTestService {
  readonly #box: SecretBox;
  readonly #guard: OutboundGuard;
  readonly #clock: Clock;
  readonly #timeoutMs: number;

  constructor(deps: { box: SecretBox; guard: OutboundGuard; clock: Clock; timeoutMs: number }) {
    this.#box = deps.box;
    this.#guard = deps.guard;
    this.#clock = deps.clock;
    this.#timeoutMs = deps.timeoutMs;
  }

  /** Sends one test event. @throws DomainError not_found; conflict `no webhook URL configured`. */
  async send(instance: Instance): Promise<TestDelivery> {
    if (instance.webhookUrl === null) throw errors.conflict('no webhook URL configured');
    const id = randomUUID();
    const body = JSON.stringify({
      type: 'Test',
      event: { message: 'parley test event: your webhook receives events from this instance' },
      instanceId: instance.id,
      sequence: 0,
    });
    const headers = webhookHeaders({
      id,
      timestampSeconds: Math.floor(this.#clock() / 1000),
      body,
      hmacKey: instance.hmacKeySealed === null ? null : this.#box.open(instance.hmacKeySealed),
    });
    const started = performance.now();
    try {
      const response = await this.#guard.request(instance.webhookUrl, {
        method: 'POST',
        headers,
        body,
        timeoutMs: this.#timeoutMs,
        maxResponseBytes: RESPONSE_BYTES,
        onTooLarge: 'truncate',
      });
      const success = response.status >= 200 && response.status < 300;
      return {
        id,
        statusCode: response.status,
        durationMs: response.durationMs,
        error: success ? null : `receiver answered ${response.status}`,
        responseBody: response.body.toString('utf8'),
      };
    } catch (error) {
      return {
        id,
        statusCode: null,
        durationMs: Math.round(performance.now() - started),
        error: error instanceof OutboundError ? error.publicMessage : 'attempt failed: internal error',
        responseBody: null,
      };
    }
  }
}
