import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { loadConfig } from '../../src/config/config.ts';
import type { EngineMessage, MessageSource } from '../../src/domain/messages.ts';
import { messageBody, normaliseEvent, webhookBody } from '../../src/events/normalise.ts';
import { maxAttemptsOf, parseRetryAfter, RetryPolicy, retryDelayMs } from '../../src/webhooks/backoff.ts';
import { hmacHex, standardSignature, webhookHeaders } from '../../src/webhooks/signing.ts';

const source: MessageSource = {
  chat: '120363000000000001@g.us',
  sender: '5511988880002@s.whatsapp.net',
  isFromMe: false,
  isGroup: true,
};

describe('event normalisation (docs/api.md#webhook-events, docs/decisions/0018-webhook-events-and-payloads.md)', () => {
  it('maps every message kind to event.message with conversation always present', () => {
    assert.deepEqual(messageBody({ kind: 'text', text: 'hi', quotedId: '3EB0AA' }), {
      conversation: 'hi',
      contextInfo: { stanzaId: '3EB0AA' },
    });
    assert.deepEqual(messageBody({ kind: 'image', text: 'cap', mimetype: 'image/png', fileLength: 10 }), {
      conversation: 'cap',
      imageMessage: { mimetype: 'image/png', fileLength: 10, caption: 'cap' },
    });
    assert.deepEqual(messageBody({ kind: 'audio', mimetype: 'audio/ogg', fileLength: 5 }), {
      conversation: '',
      audioMessage: { mimetype: 'audio/ogg', fileLength: 5, ptt: true },
    });
    assert.deepEqual(
      messageBody({ kind: 'document', mimetype: 'application/pdf', fileLength: 7, fileName: 'a.pdf' }),
      {
        conversation: '',
        documentMessage: { mimetype: 'application/pdf', fileLength: 7, fileName: 'a.pdf' },
      },
    );
    assert.deepEqual(messageBody({ kind: 'video', mimetype: 'video/mp4' }).videoMessage, {
      mimetype: 'video/mp4',
      fileLength: 0,
    });
    assert.deepEqual(messageBody({ kind: 'sticker', mimetype: 'image/webp', fileLength: 3 }).stickerMessage, {
      mimetype: 'image/webp',
      fileLength: 3,
    });
    assert.deepEqual(
      messageBody({ kind: 'location', latitude: 1.5, longitude: -2, name: 'N', address: 'A' }),
      {
        conversation: '',
        locationMessage: { degreesLatitude: 1.5, degreesLongitude: -2, name: 'N', address: 'A' },
      },
    );
    assert.deepEqual(messageBody({ kind: 'contact', name: 'Ann', vcard: 'BEGIN:VCARD' }), {
      conversation: '',
      contactMessage: { displayName: 'Ann', vcard: 'BEGIN:VCARD' },
    });
    assert.deepEqual(messageBody({ kind: 'reaction', reaction: { emoji: '👍', targetId: '3EB0BB' } }), {
      conversation: '',
      reactionMessage: { text: '👍', key: { id: '3EB0BB' } },
    });
    assert.deepEqual(messageBody({ kind: 'other' }), { conversation: '' });
  });

  it('normalises receipts, presence and history; ignores connection and contacts events', () => {
    const at = Date.UTC(2025, 0, 1, 0, 0, 1, 500);
    assert.deepEqual(
      normaliseEvent({ type: 'receipt', state: 'played', messageIds: ['A', 'B'], source, timestamp: at }),
      {
        type: 'ReadReceipt',
        state: 'Played',
        event: { messageIds: ['A', 'B'], messageSource: source, timestamp: '2025-01-01T00:00:01.500Z' },
      },
    );
    assert.deepEqual(normaliseEvent({ type: 'presence', source, state: 'paused', media: '' }), {
      type: 'ChatPresence',
      event: { messageSource: source, state: 'paused', media: '' },
    });
    const message: EngineMessage = {
      id: '3EB0CC',
      source,
      pushName: 'Peer',
      timestamp: at,
      content: { kind: 'text', text: 'old' },
    };
    assert.deepEqual(
      normaliseEvent({
        type: 'history',
        syncType: 'RECENT',
        progress: 40,
        chats: [{ jid: source.chat, name: 'Group', messages: [message] }],
      }),
      {
        type: 'HistorySync',
        event: {
          syncType: 'RECENT',
          progress: 40,
          chats: [
            {
              jid: source.chat,
              name: 'Group',
              messages: [
                {
                  info: {
                    id: '3EB0CC',
                    messageSource: source,
                    pushName: 'Peer',
                    timestamp: '2025-01-01T00:00:01.500Z',
                  },
                  message: { conversation: 'old' },
                },
              ],
            },
          ],
        },
      },
    );
    assert.equal(
      normaliseEvent({
        type: 'connection',
        state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
      }),
      null,
    );
    assert.equal(normaliseEvent({ type: 'contacts', contacts: [] }), null);
  });

  it('puts instanceId and sequence last in the body, after type, state and event', () => {
    const normalised = normaliseEvent({
      type: 'receipt',
      state: 'read',
      messageIds: ['A'],
      source,
      timestamp: 0,
    });
    assert.ok(normalised);
    const body = webhookBody(normalised, 'inst', 7);
    assert.deepEqual(Object.keys(JSON.parse(body)), ['type', 'state', 'event', 'instanceId', 'sequence']);
  });
});

describe('signatures (docs/decisions/0006-signatures.md)', () => {
  const key = 'k'.repeat(32);
  const body = '{"type":"Message","sequence":1}';

  it('x-hmac-signature is lowercase hex HMAC-SHA256 of the body bytes', () => {
    assert.equal(hmacHex(key, body), createHmac('sha256', key).update(body).digest('hex'));
    assert.match(hmacHex(key, body), /^[0-9a-f]{64}$/);
  });

  it('webhook-signature verifies with standardwebhooks (raw secret) and matches its own signer', () => {
    const id = 'evt-1';
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = webhookHeaders({ id, timestampSeconds: timestamp, body, hmacKey: key });
    const hook = new Webhook(key, { format: 'raw' });
    assert.deepEqual(hook.verify(body, headers), JSON.parse(body));
    assert.equal(headers['webhook-signature'], hook.sign(id, new Date(timestamp * 1000), body));
    assert.equal(headers['webhook-signature'], standardSignature(key, id, timestamp, body));
    // A replayed request with a changed timestamp no longer verifies.
    assert.throws(() => hook.verify(body, { ...headers, 'webhook-timestamp': String(timestamp - 1) }));
  });

  it('signs non-ASCII keys over their UTF-8 bytes (standardwebhooks given the bytes agrees)', () => {
    const utf8Key = 'clé-secrète-ünïcødé-0123456789abcdef';
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = webhookHeaders({ id: 'x', timestampSeconds: timestamp, body, hmacKey: utf8Key });
    const hook = new Webhook(new TextEncoder().encode(utf8Key), { format: 'raw' });
    assert.doesNotThrow(() => hook.verify(body, headers));
  });

  it('sends no signature headers without a key', () => {
    const headers = webhookHeaders({ id: 'x', timestampSeconds: 1, body, hmacKey: null });
    assert.deepEqual(Object.keys(headers).sort(), [
      'content-type',
      'user-agent',
      'webhook-id',
      'webhook-timestamp',
    ]);
  });
});

describe('retry schedule (docs/decisions/0005-outbox-and-delivery.md)', () => {
  const schedule = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

  it('gives eight attempts with the default schedule and 0 to +20 % jitter per delay, never shorter', () => {
    const max = maxAttemptsOf(schedule);
    assert.equal(max, 8);
    for (const [index, base] of schedule.entries()) {
      const low = retryDelayMs({
        attemptsMade: index + 1,
        maxAttempts: max,
        scheduleMs: schedule,
        random: 0,
      });
      const high = retryDelayMs({
        attemptsMade: index + 1,
        maxAttempts: max,
        scheduleMs: schedule,
        random: 1,
      });
      const mid = retryDelayMs({
        attemptsMade: index + 1,
        maxAttempts: max,
        scheduleMs: schedule,
        random: 0.5,
      });
      assert.deepEqual([low, mid, high], [base, Math.round(base * 1.1), Math.round(base * 1.2)]);
    }
    assert.equal(
      retryDelayMs({ attemptsMade: 8, maxAttempts: max, scheduleMs: schedule, random: 0.5 }),
      null,
    );
  });

  it('the default schedule’s shortest round lasts 24 hours or more: a receiver down a day gets everything', () => {
    // The default as the configuration reads it (WEBHOOK_RETRY_SCHEDULE unset), every delay at its least jitter.
    const defaults = loadConfig({}).webhook.retryScheduleMs;
    const max = maxAttemptsOf(defaults);
    let shortest = 0;
    let longest = 0;
    const shortened: string[] = [];
    for (let made = 1; made < max; made++) {
      const input = { attemptsMade: made, maxAttempts: max, scheduleMs: defaults };
      // Every delay at its shortest draw: the draws below find no shorter one.
      const delays = [0, 0.25, 0.5, 0.75, 1 - Number.EPSILON].map((random) => ({
        random,
        delay: retryDelayMs({ ...input, random }) ?? Number.NaN,
      }));
      shortest += Math.min(...delays.map((d) => d.delay));
      longest += Math.max(...delays.map((d) => d.delay));
      const base = defaults[made - 1] ?? Number.NaN;
      for (const { random, delay } of delays) if (delay < base) shortened.push(`delay ${made} at ${random}`);
    }
    assert.ok(shortest >= 24 * 3_600_000, `the shortest round lasts ${shortest / 3_600_000} h`);
    assert.equal(shortest, 99_305_000, '27 h 35 min 5 s');
    assert.deepEqual(shortened, [], 'no draw of the jitter shortens a delay');
    // Rounded per delay: within a millisecond a delay of 20 % more.
    assert.ok(longest <= shortest * 1.2 + max, `the longest round lasts ${longest / 3_600_000} h`);
  });

  it('honours Retry-After clamped to 1×–2× the scheduled delay', () => {
    const input = { attemptsMade: 2, maxAttempts: 8, scheduleMs: schedule, random: 0 };
    assert.equal(retryDelayMs({ ...input, retryAfterMs: 1_000 }), 300_000);
    assert.equal(retryDelayMs({ ...input, retryAfterMs: 400_000 }), 400_000);
    assert.equal(retryDelayMs({ ...input, retryAfterMs: 10_000_000 }), 600_000);
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    const now = Date.UTC(2025, 0, 1, 0, 0, 0);
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now), 0);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });

  it('reuses the last delay when the schedule shrank after a delivery was queued, and stops with no schedule', () => {
    assert.equal(
      retryDelayMs({ attemptsMade: 5, maxAttempts: 8, scheduleMs: [1_000, 2_000], random: 0.5 }),
      2_200,
    );
    assert.equal(retryDelayMs({ attemptsMade: 1, maxAttempts: 8, scheduleMs: [], random: 0.5 }), null);
  });

  it('RetryPolicy answers when to try again: schedule with jitter, Retry-After clamped, none after the last attempt', () => {
    const randoms = [0, 1, 0.5];
    const policy = new RetryPolicy(schedule, () => randoms.shift() ?? 0.5);
    const now = Date.UTC(2025, 0, 1, 0, 0, 0);
    assert.equal(policy.maxAttempts, 8);
    assert.equal(policy.nextRunAt({ attemptsMade: 1, maxAttempts: 8, now }), now + 5_000);
    assert.equal(policy.nextRunAt({ attemptsMade: 1, maxAttempts: 8, now }), now + 6_000);
    assert.equal(policy.nextRunAt({ attemptsMade: 3, maxAttempts: 8, now }), now + 1_980_000);
    // Retry-After (seconds or an HTTP date) replaces the jitter, clamped to 1×–2× the scheduled 5 minutes.
    assert.equal(policy.nextRunAt({ attemptsMade: 2, maxAttempts: 8, now, retryAfter: '10' }), now + 300_000);
    assert.equal(
      policy.nextRunAt({ attemptsMade: 2, maxAttempts: 8, now, retryAfter: '420' }),
      now + 420_000,
    );
    assert.equal(
      policy.nextRunAt({ attemptsMade: 2, maxAttempts: 8, now, retryAfter: 'Wed, 01 Jan 2025 01:00:00 GMT' }),
      now + 600_000,
    );
    // An unreadable Retry-After: the jittered delay (the draws are used up: 0.5, so +10 %).
    assert.equal(
      policy.nextRunAt({ attemptsMade: 2, maxAttempts: 8, now, retryAfter: 'later' }),
      now + 330_000,
    );
    // The row's own max_attempts bounds the round, whatever the schedule's length.
    assert.equal(policy.nextRunAt({ attemptsMade: 8, maxAttempts: 8, now }), null);
    assert.equal(policy.nextRunAt({ attemptsMade: 2, maxAttempts: 2, now }), null);
  });
});
