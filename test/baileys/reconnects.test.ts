import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { WAVersion } from 'baileys';
import { STABLE_OPEN_MS } from '../../src/engines/baileys/close-policy.ts';
import { Reconnects } from '../../src/engines/baileys/reconnects.ts';
import { capturingLogger } from './support.ts';

/**
 * What a live session's reopenings carry from socket to socket (src/engines/baileys/reconnects.ts): the counts
 * `planAfterClose` reads, the platform version a refresh reads (and keeps when the read fails), and the one pending
 * retry. The close-code table driven through a whole session: close-policy.test.ts.
 */
describe('reconnect bookkeeping', () => {
  it('counts refreshes, takes the version read and keeps the current one when the read fails', async () => {
    const answers: (WAVersion | Error)[] = [[2, 3000, 1], new Error('version page unreachable')];
    const { logger, lines } = capturingLogger();
    const reconnects = new Reconnects(
      [2, 2400, 9],
      async () => {
        const answer = answers.shift();
        if (answer instanceof Error || !answer) throw answer ?? new Error('no answer left');
        return answer;
      },
      logger,
    );
    await reconnects.refreshVersion();
    assert.deepEqual([reconnects.refreshes, reconnects.version], [1, [2, 3000, 1]]);
    await reconnects.refreshVersion();
    assert.deepEqual(
      [reconnects.refreshes, reconnects.version],
      [2, [2, 3000, 1]],
      'kept after a failed read',
    );
    assert.deepEqual(
      lines.map((line) => [line.level, line.msg]),
      [
        [30, 'platform version refreshed'],
        [40, 'refreshing the platform version failed; retrying with the current one'],
      ],
    );
    reconnects.refusals = 3;
    reconnects.reset();
    assert.deepEqual([reconnects.attempt, reconnects.refreshes, reconnects.refusals], [0, 0, 0]);
    assert.deepEqual(reconnects.version, [2, 3000, 1], 'a reset keeps the version read');
  });

  it('runs one retry at a time: a new one replaces the pending one, a cancel ends it, each counts an attempt', (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const reconnects = new Reconnects(undefined, async () => [2, 3000, 1], capturingLogger().logger);
    const ran: string[] = [];
    reconnects.schedule(1_000, () => ran.push('first'));
    reconnects.schedule(2_000, () => ran.push('second'));
    t.mock.timers.tick(1_999);
    assert.equal(ran.length, 0, 'the first was replaced, the second not yet due');
    t.mock.timers.tick(1);
    assert.deepEqual(ran, ['second']);
    reconnects.schedule(500, () => ran.push('third'));
    reconnects.cancel();
    t.mock.timers.tick(1_000);
    assert.deepEqual(ran, ['second'], 'cancelled');
    assert.equal(reconnects.attempt, 3);
  });

  it('starts the attempts and refreshes over at the first open since the connect: what came before was the pairing', (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const reconnects = new Reconnects(undefined, async () => [2, 3000, 1], capturingLogger().logger);
    const counts = () => [reconnects.attempt, reconnects.refreshes, reconnects.refusals];
    // The pairing's restart (515), then a login after it that failed before opening.
    reconnects.schedule(0, () => undefined);
    reconnects.schedule(0, () => undefined);
    reconnects.refreshes = 1;
    reconnects.refusals = 1;
    reconnects.opened();
    assert.deepEqual(counts(), [0, 0, 0], 'the first open');
    reconnects.closed();
    reconnects.schedule(0, () => undefined);
    reconnects.opened();
    assert.deepEqual(counts(), [1, 0, 0], 'a later open keeps the series');
    reconnects.reset();
    reconnects.schedule(0, () => undefined);
    reconnects.opened();
    assert.deepEqual(counts(), [0, 0, 0], 'the first open since another connect');
    reconnects.cancel();
  });

  it('starts the attempts and refreshes over once a later open stayed open STABLE_OPEN_MS, the refusals at once', (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const reconnects = new Reconnects(undefined, async () => [2, 3000, 1], capturingLogger().logger);
    const counts = () => [reconnects.attempt, reconnects.refreshes, reconnects.refusals];
    reconnects.opened();
    reconnects.closed();
    reconnects.schedule(0, () => undefined);
    reconnects.schedule(0, () => undefined);
    reconnects.refreshes = 1;
    reconnects.refusals = 2;
    reconnects.opened();
    assert.deepEqual(counts(), [2, 1, 0], 'a login that opened was not refused');
    t.mock.timers.tick(STABLE_OPEN_MS - 1);
    reconnects.closed();
    t.mock.timers.tick(STABLE_OPEN_MS);
    assert.deepEqual(counts(), [2, 1, 0], 'closed a moment too soon: the series goes on');
    reconnects.opened();
    reconnects.cancel();
    t.mock.timers.tick(STABLE_OPEN_MS);
    assert.deepEqual(counts(), [2, 1, 0], 'ended on purpose before it stayed open');
    reconnects.opened();
    t.mock.timers.tick(STABLE_OPEN_MS);
    assert.deepEqual(counts(), [0, 0, 0], 'stayed open');
  });
});
