import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { type ClosedSocket, planAfterClose } from '../../src/engines/baileys/after-close.ts';
import { decideClose } from '../../src/engines/baileys/close-policy.ts';

/** A close of a paired, open login that was not refused, with no refresh or reconnect before it. */
function closed(code: number | undefined, over: Partial<ClosedSocket> = {}): ClosedSocket {
  return {
    decision: decideClose(code),
    message: 'closed',
    error: undefined,
    connecting: false,
    paired: true,
    refusal: false,
    refusals: 0,
    refusalLimit: 3,
    refreshes: 0,
    attempt: 0,
    random: () => 0.5,
    ...over,
  };
}

describe('what follows a close (docs/decisions/0025-live-engine.md)', () => {
  it('while connecting: a 515 or a first 405 opens a new socket, anything else fails the connect', () => {
    assert.deepEqual(planAfterClose(closed(515, { connecting: true })).plan, {
      kind: 'reopen',
      refreshVersion: false,
    });
    assert.deepEqual(planAfterClose(closed(405, { connecting: true })).plan, {
      kind: 'reopen',
      refreshVersion: true,
    });
    const second = planAfterClose(closed(405, { connecting: true, refreshes: 1 })).plan;
    assert.ok(second.kind === 'fail-connect');
    // Refused again after the refresh: nothing retries, and the reason says so.
    assert.equal(second.failure.code, 'platform_refused');
    assert.equal(
      second.failure.message,
      'client version outdated (405): refused again after a refresh of the platform version in a row; not reconnecting: update parley, then call connect to try again',
    );
    const unlinked = planAfterClose(closed(401, { connecting: true })).plan;
    assert.ok(unlinked.kind === 'fail-connect');
    assert.ok(unlinked.failure instanceof DomainError);
    assert.equal(unlinked.failure.code, 'platform_refused');
    assert.equal(unlinked.wipe, true);
    const lost = planAfterClose(closed(408, { connecting: true, message: 'socket hang up' })).plan;
    assert.ok(lost.kind === 'fail-connect');
    assert.equal(lost.failure.code, 'platform_unreachable');
    assert.equal(lost.failure.message, 'cannot reach the platform: socket hang up');
    assert.equal(lost.wipe, false);
    const replaced = planAfterClose(closed(440, { connecting: true })).plan;
    assert.ok(replaced.kind === 'fail-connect');
    assert.equal(replaced.cause, 'replaced');
  });

  it('ends a pairing attempt on any code but 515, deleting what it stored', () => {
    assert.deepEqual(planAfterClose(closed(408, { paired: false })).plan, {
      kind: 'stop',
      reason: 'pairing ended: no QR code was scanned in time; call connect again',
      wipe: true,
      cause: undefined,
    });
    assert.deepEqual(planAfterClose(closed(515, { paired: false })).plan, {
      kind: 'retry',
      delayMs: 0,
      refreshVersion: false,
      reason: 'restart required (515); reconnecting',
    });
  });

  it('counts refusals of a reconnecting login and stops it as restricted at the limit', () => {
    const first = planAfterClose(closed(500, { refusal: true, refusals: 1 }));
    assert.equal(first.refusals, 2);
    assert.equal(first.plan.kind, 'retry');
    const last = planAfterClose(closed(500, { refusal: true, refusals: 2 }));
    assert.equal(last.refusals, 3);
    assert.ok(last.plan.kind === 'stop');
    assert.equal(last.plan.cause, 'restricted');
    assert.equal(last.plan.wipe, false);
    assert.match(last.plan.reason, /^the platform refused the login 3 times in a row \(last: bad session/);
    // A network failure is not a refusal, and a refusal while connecting is not counted.
    assert.equal(planAfterClose(closed(500, { refusals: 2 })).refusals, 2);
    assert.equal(planAfterClose(closed(500, { refusal: true, refusals: 2, connecting: true })).refusals, 2);
  });

  it('applies the close-code table, stopping after three version refreshes in a row', () => {
    assert.deepEqual(planAfterClose(closed(401)).plan, {
      kind: 'stop',
      reason: decideClose(401).reason,
      wipe: true,
      cause: undefined,
    });
    assert.deepEqual(planAfterClose(closed(403)).plan, {
      kind: 'stop',
      reason: decideClose(403).reason,
      wipe: false,
      cause: 'restricted',
    });
    assert.deepEqual(planAfterClose(closed(405, { refreshes: 2 })).plan, {
      kind: 'retry',
      delayMs: 0,
      refreshVersion: true,
      reason: decideClose(405).reason,
    });
    assert.deepEqual(planAfterClose(closed(405, { refreshes: 3 })).plan, {
      kind: 'stop',
      reason:
        'client version outdated (405): refused again after 3 refreshes of the platform version in a row; not reconnecting: update parley, then call connect to try again',
      wipe: false,
      cause: undefined,
    });
  });

  it('reconnects after the backoff, at once for a first 515 since the connect or a stable open', () => {
    // 1 s doubled twice, no jitter at random 0.5.
    assert.deepEqual(planAfterClose(closed(408, { attempt: 2 })).plan, {
      kind: 'retry',
      delayMs: 4_000,
      refreshVersion: false,
      reason: 'connection lost or timed out (408); reconnecting in 4 s',
    });
    const restart = planAfterClose(closed(515)).plan;
    assert.ok(restart.kind === 'retry');
    assert.equal(restart.delayMs, 0);
    // Again before the connection stayed open STABLE_OPEN_MS: the series goes on.
    const again = planAfterClose(closed(515, { attempt: 1 })).plan;
    assert.ok(again.kind === 'retry');
    assert.equal(again.delayMs, 2_000);
  });
});
