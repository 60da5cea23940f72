/**
 * A recipient's receipt that reaches parley before the send it names is recorded, with a live key against the
 * platform simulator: the platform took the message but its ack was lost (`withhold-acks`), so the send is relayed
 * again under its id and recorded only then (docs/decisions/0009-sends-as-jobs.md). The receipt is held for the send
 * and applied when its message is recorded: the stored message ends `read`, and the `ReadReceipt` comes after the
 * `Message` it names (docs/decisions/0104-receipts-before-their-send.md). Two ways: the recipient reads while parley
 * waits for the ack, and a receipt delivered offline at the login of the process that took over after the first one
 * stopped mid-relay. Before, the receipt found no stored message: its state was lost (the row stayed `sent` for
 * good) and its webhook came before the message's. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { messageRow } from './observe.ts';
import {
  companion,
  control,
  type LiveApp,
  liveApp,
  pairLive,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

/** The webhook events of instance `instanceId` naming message `id`, in sequence order: `type` (and `state`). */
async function eventsNaming(testStore: TestStore, instanceId: string, id: string): Promise<string[]> {
  const rows = await testStore.store.db
    .selectFrom('webhook_events')
    .select(['type', 'sequence', 'payload'])
    .where('instance_id', '=', instanceId)
    .orderBy('sequence')
    .execute();
  const named: string[] = [];
  for (const row of rows) {
    const body = JSON.parse(row.payload);
    if (body.type === 'Message' && body.event.info.id === id) named.push('Message');
    if (body.type === 'ReadReceipt' && body.event.messageIds.includes(id))
      named.push(`ReadReceipt ${body.state}`);
  }
  return named;
}

for (const dialect of testDialects()) {
  describe(`live engine: a receipt that comes before its send is recorded (${dialect})`, () => {
    let sim: Simulator;
    // One account and recipient per case: a case's companion device stays linked after it.
    const [shop, ana, shop2, ana2] = ['5541999990400', '5541988887400', '5541999990401', '5541988887401'];
    const inbox = (phone: string) => sim.context.accounts.get(phone)?.inbox ?? [];

    before(async () => {
      sim = await startTestSimulator();
      for (const phone of [shop, ana, shop2, ana2]) await control(sim, 'POST', '/users', { phone });
    });
    after(async () => {
      await sim.close();
    });

    it('read while parley waits for the ack: the message ends read, the receipt after it', async () => {
      const testStore = await createTestStore(dialect);
      let app: LiveApp | undefined;
      try {
        app = await liveApp(sim, { testStore, tuning: { ackTimeoutMs: 2_000 } });
        await pairLive(sim, app, shop, ['Message', 'ReadReceipt']);
        const warm = await app.live('POST', '/v1/messages/send', { phone: ana, body: 'warm-up' });
        assert.equal(warm.status, 200, JSON.stringify(warm.body));
        const fault = await control(sim, 'POST', '/faults', { phone: shop, kind: 'withhold-acks' });
        assert.equal(fault.status, 200, JSON.stringify(fault.body));
        const sending = app.live('POST', '/v1/messages/send', { phone: ana, body: 'read early' });
        const entry = await until('at Ana', () => inbox(ana).find((e) => e.text === 'read early'));
        const read = await control(sim, 'POST', '/receipts', {
          from: ana,
          to: shop,
          ids: [entry.id],
          type: 'read',
        });
        assert.equal(read.status, 200, JSON.stringify(read.body));
        const sent = await sending;
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        assert.equal(sent.body.data.id, entry.id);
        const live = app;
        await until('read', async () =>
          (await messageRow(live, entry.id))?.state === 'read' ? true : undefined,
        );
        assert.deepEqual(await eventsNaming(testStore, app.instanceId, entry.id), [
          'Message',
          'ReadReceipt Read',
        ]);
        const held = await testStore.store.db.selectFrom('held_receipts').selectAll().execute();
        assert.deepEqual(held, [], 'a held receipt goes once applied');
      } finally {
        await app?.t.close();
        await testStore.cleanup();
      }
    });

    it('a receipt delivered offline to the process that took over, before it relays the send again', async () => {
      const testStore = await createTestStore(dialect);
      try {
        const first = await liveApp(sim, { testStore, tuning: { ackTimeoutMs: 60_000 } });
        await pairLive(sim, first, shop2, ['Message', 'ReadReceipt']);
        const fault = await control(sim, 'POST', '/faults', { phone: shop2, kind: 'withhold-acks' });
        assert.equal(fault.status, 200, JSON.stringify(fault.body));
        const queued = await first.t.call(
          'POST',
          `/v1/messages/send?from=${first.instanceId}`,
          { phone: ana2, body: 'read offline' },
          { authorization: `Bearer ${first.liveKey}`, prefer: 'respond-async' },
        );
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        const id: string = queued.body.data.id;
        await until('at Ana', () => inbox(ana2).find((e) => e.id === id));
        // The process stops while its relay waits for the ack: the job stays `sending`, its outcome unknown.
        await first.t.close();
        await until('the first process gone', async () =>
          (await companion(sim, shop2)).sockets === 0 ? true : undefined,
        );
        // Ana reads meanwhile: the receipt waits in the platform's offline queue for parley's next login.
        const device = [...(sim.context.accounts.get(shop2)?.devices.values() ?? [])].find(
          (d) => d.id !== 0 && d.linked,
        );
        assert.ok(device, 'the linked companion device');
        device.offline.push({
          tag: 'receipt',
          attrs: {
            from: `${ana2}@s.whatsapp.net`,
            id,
            t: String(Math.floor(Date.now() / 1000)),
            type: 'read',
          },
        });
        const second = await liveApp(sim, {
          testStore,
          existing: { instanceId: first.instanceId, liveKey: first.liveKey },
        });
        try {
          assert.equal(await second.t.services.sessions.restoreAll(), 1);
          await waitForStatus(second, true, true);
          await until('read', async () =>
            (await messageRow(second, id))?.state === 'read' ? true : undefined,
          );
          await until('the job sent', async () => {
            const job = await testStore.store.db
              .selectFrom('send_jobs')
              .select('status')
              .where('id', '=', id)
              .executeTakeFirst();
            return job?.status === 'sent' ? true : undefined;
          });
          assert.deepEqual(await eventsNaming(testStore, second.instanceId, id), [
            'Message',
            'ReadReceipt Read',
          ]);
          assert.equal(inbox(ana2).filter((e) => e.id === id).length, 1, 'Ana sees the message once');
        } finally {
          await second.t.close();
        }
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
