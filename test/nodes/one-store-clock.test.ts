import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { LEASE_TTL_MS } from '../../src/nodes/leases.ts';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import { loginSandbox } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type ReceiverReply, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, recordMessages } from '../webhooks/support.ts';

/**
 * One node holds one store clock (docs/decisions/0008-leases-and-fencing.md, "One clock"): its registry's heartbeats,
 * its lease keeper's expiries and its webhook claims are all written on the services' `StoreClock`, so they agree on
 * the time and the store's clock is read into one estimate. Before, the registry and the lease keeper each made a
 * clock of their own and the webhook worker stamped claims on the wall clock. The store clock here reads a store an
 * hour ahead of this machine, which only the services' clock knows.
 */

/** How far the store's clock is ahead of this machine's, as the services' clock reads it, ms. */
const SKEW_MS = 3_600_000;
/** How close a time written on the skewed clock must be to the expected one, ms. */
const TOLERANCE_MS = 10_000;

for (const dialect of testDialects()) {
  describe(`one store clock per node (${dialect})`, () => {
    it('the registry, the lease keeper and the webhook worker write their times on the services’ store clock', async () => {
      const testStore = await createTestStore(dialect);
      const receiver = await startReceiver();
      const storeClock = new StoreClock({
        db: testStore.store.db,
        logger: pino({ level: 'silent' }),
        read: async () => Date.now() + SKEW_MS,
      });
      const t = await createWebhookApp({
        testStore,
        storeClock,
        env: { CLUSTER_SECRET: 'c'.repeat(32), WEBHOOK_TIMEOUT_SECONDS: '60' },
        webhookWorker: { start: false, laneBatch: 1 },
      });
      const held: ((reply: ReceiverReply) => void)[] = [];
      try {
        const db = testStore.store.db;
        const near = (at: number | string | null | undefined, expected: number, what: string) =>
          assert.ok(
            Math.abs(Number(at) - expected) < TOLERANCE_MS,
            `${what} at ${at}, not on the services' store clock (${expected})`,
          );
        const node = await db
          .selectFrom('nodes')
          .select('heartbeat_at')
          .where('id', '=', t.services.nodes.id)
          .executeTakeFirstOrThrow();
        near(node.heartbeat_at, Date.now() + SKEW_MS, "the registry's heartbeat");

        await loginSandbox(t);
        const keeper = t.services.cluster?.keeper;
        assert.ok(keeper, 'a cluster node');
        try {
          await keeper.start('http://127.0.0.1:9');
          const lease = await db
            .selectFrom('instance_leases')
            .select('expires_at')
            .where('instance_id', '=', t.instance.id)
            .executeTakeFirstOrThrow();
          near(lease.expires_at, Date.now() + SKEW_MS + LEASE_TTL_MS, "the lease keeper's expiry");
        } finally {
          await keeper.stop();
        }

        await configureWebhook(t, receiver.url);
        receiver.respondWith(
          () =>
            new Promise<ReceiverReply>((resolve) => {
              held.push(resolve);
            }),
        );
        await recordMessages(t, 1);
        const running = t.services.webhooks.runOnce();
        const claimed = await eventually('a claimed delivery', async () => {
          const row = await db
            .selectFrom('webhook_deliveries')
            .select('locked_at')
            .where('locked_by', '=', t.services.nodes.id)
            .executeTakeFirst();
          return row?.locked_at ?? undefined;
        });
        near(claimed, Date.now() + SKEW_MS, "the webhook worker's claim");
        // the claim is written before the request reaches the receiver: released before it arrived, the request
        // would be held until WEBHOOK_TIMEOUT_SECONDS ran out (a minute on SQLite in CI)
        await eventually('the claimed delivery at the receiver', () => held.length > 0);
        for (const release of held) release({ status: 200, body: 'ok' });
        await running;
      } finally {
        for (const release of held) release({ status: 200, body: 'ok' });
        await t.close();
        await receiver.close();
        await testStore.cleanup();
      }
    });
  });
}
