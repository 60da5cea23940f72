/**
 * A boot restore's retry counts as coming back by itself for the whole of its try
 * (docs/decisions/0016-session-lifecycle.md): from the moment its timer fires until its restore settles, the
 * instance is `waiting`, so a request arriving while the retry takes the instance's turn and reads its row is answered
 * `503` with `Retry-After`, never `409 instance is not logged in` from a session whose engine has not read its
 * credentials yet. Before, the timer forgot the retry as it fired and the instance looked stopped until the connect
 * began.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { SessionRestorer } from '../../src/sessions/restore.ts';
import { reconnecting } from '../../src/sessions/status.ts';
import { until } from '../baileys/support.ts';
import { createTestApp, loginSandbox } from '../support/app.ts';

describe('a boot restore retry under way', () => {
  it('stays waiting from its timer until its restore settles, and pending only until the timer fires', async () => {
    const t = await createTestApp();
    try {
      await loginSandbox(t, '5511999990311');
      const instanceId = t.instance.id;
      let tries = 0;
      let settle: (() => void) | undefined;
      const restorer = new SessionRestorer({
        db: t.services.store.db,
        logger: pino({ level: 'silent' }),
        retry: { baseMs: 5, maxMs: 5 },
        connect: async (id) => {
          if (id !== instanceId) return false;
          tries += 1;
          if (tries === 1) throw reconnecting();
          // The retry: held open, as a restore waiting for the instance's turn and its row.
          await new Promise<void>((resolve) => {
            settle = resolve;
          });
          return true;
        },
        stops: () => 0,
        connected: () => false,
        kept: () => true,
      });
      try {
        assert.equal(await restorer.restoreAll(), 0, 'the first try fails');
        assert.equal(restorer.waiting(instanceId), true, 'its retry is pending');
        await until(() => settle !== undefined, 5_000, 'the retry under way');
        assert.deepEqual(
          [restorer.waiting(instanceId), restorer.pending],
          [true, 0],
          'under way: still coming back by itself, no longer pending',
        );
        settle?.();
        await until(() => !restorer.waiting(instanceId), 5_000, 'the retry settled');
        assert.equal(tries, 2);
      } finally {
        restorer.stop();
      }
    } finally {
      await t.close();
    }
  });
});
