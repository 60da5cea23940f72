/**
 * A live send whose message reaches the platform while recording it fails for good (a permanent store error on the
 * outgoing message's row, injected through the store's test-only fault hook): the job ends `sent`, never `failed`,
 * so no client is told to send the message again (docs/decisions/0009-sends-as-jobs.md,
 * docs/decisions/0024-engines-and-data-flow.md). A synchronous send answers 200 with its id; a queued one is relayed
 * once (a failed relay of a queued job would be tried again) and its `MessageStatus sent` reaches a real HTTPS
 * receiver, once. The simulated user's inbox shows each message once. The synchronous case also fails when a
 * recording that rolled back leaves its job counted as recorded (the job then stays `sending`). Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { checkViolation, createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const SHOP = '5541999990031';
const ANA = '5541988880031';

for (const dialect of testDialects()) {
  describe(`live engine: a send that went out but could not be recorded (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let testStore: TestStore;
    let app: LiveApp;
    /** While true, every statement writing an outgoing message's row fails. */
    let failing = false;
    let failed = 0;

    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (failing && /insert into "messages"/i.test(sql)) {
            failed += 1;
            throw checkViolation('messages');
          }
        },
      });
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { testStore });
      for (const [phone, pushName] of [
        [SHOP, 'Shop'],
        [ANA, 'Ana'],
      ] as const) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
      await pairLive(sim, app, SHOP);
      const subscribed = await app.live('POST', '/v1/session/connect', {
        subscribe: ['Message', 'MessageStatus'],
      });
      assert.equal(subscribed.status, 200, JSON.stringify(subscribed.body));
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
      await testStore.cleanup();
    });

    const job = (id: string) =>
      testStore.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'last_error'])
        .where('instance_id', '=', app.instanceId)
        .where('id', '=', id)
        .executeTakeFirst();
    const messageRows = async (id: string) =>
      (
        await testStore.store.db
          .selectFrom('messages')
          .select('id')
          .where('instance_id', '=', app.instanceId)
          .where('id', '=', id)
          .execute()
      ).length;
    const inboxCopies = (id: string) =>
      (sim.context.accounts.get(ANA)?.inbox ?? []).filter((entry) => entry.id === id).length;

    /** While `failing` is set, the sends of `work` cannot be recorded; it is cleared however `work` ends. */
    async function unrecordable<T>(work: () => Promise<T>): Promise<T> {
      failing = true;
      try {
        return await work();
      } finally {
        failing = false;
      }
    }
    /** The `MessageStatus` webhooks the receiver got for message `id`. */
    const statusWebhooks = (id: string) =>
      bodies(receiver.requests).filter((body) => body.type === 'MessageStatus' && body.event.id === id);
    let syncId = '';

    it('a synchronous send answers 200 with its id and its job ends sent', async () => {
      const before = failed;
      const sent = await unrecordable(() =>
        app.live('POST', '/v1/messages/send', { phone: ANA, body: 'Your order shipped' }),
      );
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const id: string = sent.body.data.id;
      syncId = id;
      assert.ok(failed > before, 'recording the message failed');
      await until('Ana received the message', () => (inboxCopies(id) > 0 ? true : undefined));
      assert.deepEqual(await job(id), { status: 'sent', attempts: 1, last_error: null });
      assert.equal(await messageRows(id), 0, 'the message row is the part lost (logged)');
      const shown = await app.live('GET', `/v1/messages/${id}`);
      assert.equal(shown.status, 200, JSON.stringify(shown.body));
      assert.equal(shown.body.data.status, 'sent');
      assert.equal(shown.body.data.message.conversation, 'Your order shipped');
      assert.equal(inboxCopies(id), 1);
    });

    it('a queued send is relayed once, ends sent and tells the receiver so, once', async () => {
      const queue = (body: string) =>
        app.t.call(
          'POST',
          `/v1/messages/send?from=${app.instanceId}`,
          { phone: ANA, body },
          { authorization: `Bearer ${app.liveKey}`, prefer: 'respond-async' },
        );
      const before = failed;
      const id = await unrecordable(async () => {
        const queued = await queue('Your invoice');
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        const queuedId: string = queued.body.data.id;
        await waitForWebhook(
          receiver,
          (body) => body.type === 'MessageStatus' && body.event.id === queuedId,
          'the queued send’s MessageStatus',
        );
        return queuedId;
      });
      assert.ok(failed > before, 'recording the message failed');
      assert.deepEqual(await job(id), { status: 'sent', attempts: 1, last_error: null });
      // A later send's event arrives after every earlier event of the instance (one lane, in sequence order).
      const fence = await queue('Thank you');
      assert.equal(fence.status, 202, JSON.stringify(fence.body));
      await waitForWebhook(
        receiver,
        (body) => body.type === 'MessageStatus' && body.event.id === fence.body.data.id,
        'the next send’s MessageStatus',
      );
      assert.deepEqual(
        statusWebhooks(id).map((body) => body.event.status),
        ['sent'],
      );
      assert.deepEqual(statusWebhooks(syncId), [], 'the synchronous send’s answer was its outcome');
      assert.equal(inboxCopies(id), 1);
    });
  });
}
