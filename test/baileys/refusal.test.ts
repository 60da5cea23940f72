/**
 * What counts as the platform refusing a login (close-policy.ts isPlatformRefusal) and the stop reason after a
 * refusal loop: a `<failure>` or `<stream:error>` Boom is a refusal, a network failure is not.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideClose, isPlatformRefusal, refusalLoopReason } from '../../src/engines/baileys/close-policy.ts';
import { boom } from './fake-socket.ts';

describe('platform refusals of a login', () => {
  it('a <failure> (data: its attributes) and a <stream:error> (data: the node) are refusals', () => {
    assert.equal(
      isPlatformRefusal(boom('Connection Failure', { statusCode: 503, data: { reason: '503' } })),
      true,
    );
    assert.equal(
      isPlatformRefusal(
        boom('Stream Errored (unknown)', { statusCode: 515, data: { tag: 'stream:error', attrs: {} } }),
      ),
      true,
    );
  });

  it('a network failure is not: closed or lost (no data), a WebSocket error (data: an Error), anything else', () => {
    assert.equal(isPlatformRefusal(boom('Connection Terminated', { statusCode: 428 })), false);
    assert.equal(
      isPlatformRefusal(boom('WebSocket Error (ECONNREFUSED)', { statusCode: 500, data: new Error('x') })),
      false,
    );
    assert.equal(isPlatformRefusal(new Error('plain')), false);
    assert.equal(isPlatformRefusal(undefined), false);
  });

  it('the stop reason names the count and the last refusal without its "reconnecting"', () => {
    assert.equal(
      refusalLoopReason(5, decideClose(503)),
      'the platform refused the login 5 times in a row (last: platform unavailable (503)); not reconnecting: the account may be blocked or banned, check it on the phone, then call connect to try again',
    );
  });
});
