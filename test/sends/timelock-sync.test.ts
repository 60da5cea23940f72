/**
 * A reach-out timelock met by a synchronous send relayed at once (the queue's immediate path, no drain pass running)
 * still ends with its `SessionStatus` `resumed` at its end, with no other send on the instance
 * (docs/decisions/0013-pacing.md). Without a wake of the queue set for the timelock's end on that path, the `resumed`
 * came only with the instance's next send. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
const REASON = 'reach-out timelock (463)';

for (const dialect of testDialects()) {
  describe(`timelock met by an immediate synchronous send [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    let refuse: DomainError | undefined;
    const reports: SendStatusReport[] = [];

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const session = fakeSession(async (message) => {
        if (refuse) {
          const error = refuse;
          refuse = undefined;
          throw error;
        }
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, async (_id, report) => {
        reports.push(report);
      });
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('reports resumed at the timelock end without another send', async () => {
      queue.wake(t.instance.id);
      let probes = 0;
      await eventually('a synchronous send relayed at once', async () => {
        probes += 1;
        const probe = textJob(
          t.instance.id,
          `3EB0PROBE${String(probes).padStart(13, '0')}`,
          'sync',
          t.clock(),
        );
        const wait = await queue.storeSync(
          fakeSession(async (m) => ({ id: m.id ?? '', timestamp: t.clock() })),
          probe,
        );
        const stored = await t.services.store.db
          .selectFrom('send_jobs')
          .select('status')
          .where('id', '=', probe.id)
          .executeTakeFirstOrThrow();
        await wait();
        return stored.status === 'sending';
      });
      reports.length = 0;
      refuse = new DomainError('rate_limited', REASON, { retryAfter: 1, restriction: 'reach-out-timelock' });
      const job = {
        ...textJob(t.instance.id, '3EB0SYNCTL0000000000A1', 'sync', t.clock()),
        chat: '5511955554444@s.whatsapp.net',
      };
      const session = fakeSession(async () => {
        throw refuse ?? new Error('unexpected');
      });
      const wait = await queue.storeSync(session, job);
      await assert.rejects(wait());
      await eventually('the paused report', () => reports.some((r) => r.status === 'paused'));
      // The timelock (1 s) has ended on the queue's clock; nothing else happens on the instance.
      t.clock.set(T0 + 1_000);
      await eventually('the resumed report', () => reports.some((r) => r.status === 'resumed'), 4_000);
    });
  });
}
