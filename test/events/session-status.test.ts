import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConnectionState } from '../../src/domain/messages.ts';
import { normaliseEvent, webhookBody } from '../../src/events/normalise.ts';
import { SessionStatusTracker, sessionStatusOf } from '../../src/events/session-status.ts';

/**
 * The session status rule (docs/decisions/0012-session-and-message-status-events.md): which status each
 * connection change means, read from the states both engines report, and the SessionStatus / MessageStatus
 * webhook payloads.
 */

const AT = Date.UTC(2025, 2, 3, 4, 5, 6, 7);
const JID = '5511999990001.0:1@s.whatsapp.net';

function state(connected: boolean, loggedIn: boolean, extra: Partial<ConnectionState> = {}): ConnectionState {
  return {
    connected,
    loggedIn,
    jid: loggedIn ? JID : null,
    phone: loggedIn ? '5511999990001' : null,
    pushName: null,
    ...extra,
  };
}

describe('session status of a connection change', () => {
  it('follows a pairing, a reconnecting drop, a takeover, a block and an unlink (the live engine’s states)', () => {
    const tracker = new SessionStatusTracker({ connected: false, loggedIn: false });
    const steps: [ConnectionState, unknown][] = [
      [state(true, false), { type: 'sessionStatus', status: 'qr', at: AT }],
      // The phone scanned: paired, the socket restarts (515) before it opens logged in.
      [
        state(false, true, { reason: 'restart required (515); reconnecting in 1 s' }),
        { type: 'sessionStatus', status: 'pairing', at: AT },
      ],
      [state(true, true), { type: 'sessionStatus', status: 'connected', at: AT }],
      [
        state(false, true, { reason: 'connection closed (428); reconnecting in 1.1 s' }),
        {
          type: 'sessionStatus',
          status: 'disconnected',
          reason: 'connection closed (428); reconnecting in 1.1 s',
          at: AT,
        },
      ],
      // Another failed reconnect with a new delay is reported again; the same state twice is not.
      [
        state(false, true, { reason: 'connection closed (428); reconnecting in 2.2 s' }),
        {
          type: 'sessionStatus',
          status: 'disconnected',
          reason: 'connection closed (428); reconnecting in 2.2 s',
          at: AT,
        },
      ],
      [state(false, true, { reason: 'connection closed (428); reconnecting in 2.2 s' }), null],
      [state(true, true), { type: 'sessionStatus', status: 'connected', at: AT }],
      [state(true, true), null],
      [
        state(false, true, { reason: 'replaced (440)', cause: 'replaced' }),
        { type: 'sessionStatus', status: 'replaced', reason: 'replaced (440)', at: AT },
      ],
      [state(true, true), { type: 'sessionStatus', status: 'connected', at: AT }],
      [
        state(false, true, { reason: 'refused 5 times', cause: 'restricted' }),
        { type: 'sessionStatus', status: 'restricted', reason: 'refused 5 times', at: AT },
      ],
      // A requested disconnect after the stop: the reason is gone, so it is a change.
      [state(false, true), { type: 'sessionStatus', status: 'disconnected', at: AT }],
      [state(true, true), { type: 'sessionStatus', status: 'connected', at: AT }],
      [
        state(false, false, { reason: 'logged out (401)' }),
        { type: 'sessionStatus', status: 'logged_out', reason: 'logged out (401)', at: AT },
      ],
      // Logging out again changes nothing.
      [state(false, false), null],
    ];
    for (const [i, [next, expected]] of steps.entries()) {
      assert.deepEqual(tracker.next(next, AT), expected, `step ${i + 1}`);
    }
  });

  it('a pairing that ends unscanned is a disconnect; a failed first connect of a new instance is nothing', () => {
    const qr = { connected: true, loggedIn: false };
    assert.deepEqual(sessionStatusOf(qr, state(false, false, { reason: 'pairing ended' }), AT), {
      type: 'sessionStatus',
      status: 'disconnected',
      reason: 'pairing ended',
      at: AT,
    });
    const idle = { connected: false, loggedIn: false };
    assert.equal(sessionStatusOf(idle, state(false, false, { reason: 'cannot reach' }), AT), null);
  });

  it('a restored session starts from the instance’s stored login: its first open is connected', () => {
    const tracker = new SessionStatusTracker({ connected: false, loggedIn: true });
    assert.equal(tracker.next(state(false, true), AT), null, 'a disconnect of a session never opened here');
    assert.deepEqual(tracker.next(state(true, true), AT), {
      type: 'sessionStatus',
      status: 'connected',
      at: AT,
    });
  });
});

describe('SessionStatus and MessageStatus payloads', () => {
  it('normalises every field with RFC 3339 UTC times, optional fields only when set', () => {
    const paused = normaliseEvent({
      type: 'sessionStatus',
      status: 'paused',
      reason: 'send pacing',
      until: AT + 60_000,
      at: AT,
    });
    assert.ok(paused);
    assert.equal(
      webhookBody(paused, 'inst-1', 7),
      '{"type":"SessionStatus","event":{"status":"paused","reason":"send pacing","until":"2025-03-03T04:06:06.007Z","at":"2025-03-03T04:05:06.007Z"},"instanceId":"inst-1","sequence":7}',
    );
    assert.deepEqual(normaliseEvent({ type: 'sessionStatus', status: 'resumed', at: AT }), {
      type: 'SessionStatus',
      event: { status: 'resumed', at: '2025-03-03T04:05:06.007Z' },
    });
    const failed = normaliseEvent({
      type: 'messageStatus',
      id: 'M1',
      status: 'failed',
      error: 'boom',
      at: AT,
    });
    assert.ok(failed);
    assert.equal(
      webhookBody(failed, 'inst-1', 8),
      '{"type":"MessageStatus","event":{"id":"M1","status":"failed","error":"boom","at":"2025-03-03T04:05:06.007Z"},"instanceId":"inst-1","sequence":8}',
    );
    assert.deepEqual(normaliseEvent({ type: 'messageStatus', id: 'M2', status: 'canceled', at: AT }), {
      type: 'MessageStatus',
      event: { id: 'M2', status: 'canceled', at: '2025-03-03T04:05:06.007Z' },
    });
    assert.equal(normaliseEvent({ type: 'connection', state: state(true, true) }), null);
  });
});
