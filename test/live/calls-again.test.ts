/**
 * Call notifications the platform hands over again after parley restarted (docs/decisions/0024-engines-and-data-flow.md:
 * what the platform hands over again is recorded once; docs/decisions/0026-chats-edits-polls-and-calls.md). The
 * account's acknowledgements are lost on the way (`lose-acks`), so when the first process's socket closes the platform
 * puts every `<call>` stanza of the connection back into the device's offline queue and hands it over again at the
 * second process's login. Before, the live engine remembered a call's reported statuses in memory only: the second
 * process reported each call again (a second `Call` offer, and a `missed` for a call already rejected). Runs on
 * SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { waitForWebhook } from './observe.ts';
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

/** The statuses of call `id`'s `Call` events in the event log, in sequence order. */
async function loggedStatuses(app: LiveApp, id: string): Promise<string[]> {
  const rows = await app.t.services.store.db
    .selectFrom('webhook_events')
    .select(['payload', 'sequence'])
    .where('type', '=', 'Call')
    .orderBy('sequence')
    .execute();
  return rows
    .map((row) => JSON.parse(row.payload) as { event: { callId: string; status: string } })
    .filter((body) => body.event.callId === id)
    .map((body) => body.event.status);
}

for (const dialect of testDialects()) {
  describe(`live engine: call notifications handed over again after a restart (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let testStore: TestStore;
    const shop = '5541999990120';
    const ana = '5541988887120';
    const bruno = '5541977776120';

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      testStore = await createTestStore(dialect);
      for (const phone of [shop, ana, bruno]) await control(sim, 'POST', '/users', { phone });
    });
    after(async () => {
      await testStore.cleanup();
      await receiver.close();
      await sim.close();
    });

    it('a missed call and a rejected one come again at the next process: each status reported once', async () => {
      const first = await liveApp(sim, { testStore });
      let firstOpen = true;
      let second: LiveApp | undefined;
      try {
        assert.equal((await first.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
        await pairLive(sim, first, shop, ['Message', 'Call']);
        // From here the account's acknowledgements are lost: every call stanza of this connection comes again.
        assert.equal((await control(sim, 'POST', '/faults', { phone: shop, kind: 'lose-acks' })).status, 200);
        const isCall = (id: string, status: string) => (b: any) =>
          b.type === 'Call' && b.event.callId === id && b.event.status === status;

        // Bruno's call rings out: offer, then missed.
        const missed = await control(sim, 'POST', `/users/${bruno}/call`, { to: shop });
        assert.equal(missed.status, 201, JSON.stringify(missed.body));
        const missedId: string = missed.body.id;
        await waitForWebhook(receiver, isCall(missedId, 'offer'), "Bruno's offer");
        const hungUp = await control(sim, 'POST', `/users/${bruno}/calls/${missedId}/terminate`);
        assert.equal(hungUp.status, 200, JSON.stringify(hungUp.body));
        await waitForWebhook(receiver, isCall(missedId, 'missed'), "Bruno's missed call");

        // Ana's call is declined through the API, then she hangs up: offer, then rejected (no missed).
        const rejected = await control(sim, 'POST', `/users/${ana}/call`, { to: shop });
        assert.equal(rejected.status, 201, JSON.stringify(rejected.body));
        const rejectedId: string = rejected.body.id;
        await waitForWebhook(receiver, isCall(rejectedId, 'offer'), "Ana's offer");
        const declined = await first.live('POST', `/v1/calls/${rejectedId}/reject`);
        assert.equal(declined.status, 200, JSON.stringify(declined.body));
        const hangsUp = await control(sim, 'POST', `/users/${ana}/calls/${rejectedId}/terminate`);
        assert.equal(hangsUp.status, 200, JSON.stringify(hangsUp.body));
        // A marker behind Ana's hang-up on the same connection: once it is recorded, so was the hang-up (left out).
        const before = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'first marker' });
        assert.equal(before.status, 201, JSON.stringify(before.body));
        await waitForWebhook(
          receiver,
          (b) => b.type === 'Message' && b.event.info.id === before.body.id,
          'the first marker',
        );
        assert.deepEqual(await loggedStatuses(first, missedId), ['offer', 'missed']);
        assert.deepEqual(await loggedStatuses(first, rejectedId), ['offer', 'rejected']);

        await first.t.close();
        firstOpen = false;
        await until('the first process gone', async () =>
          (await companion(sim, shop)).sockets === 0 ? true : undefined,
        );
        // A marker waits in the device's offline queue behind the call stanzas, which the platform hands over again,
        // in order, at the next login: once the marker is recorded, so are they.
        const marker = await control(sim, 'POST', '/messages', { from: bruno, to: shop, text: 'marker' });
        assert.equal(marker.status, 201, JSON.stringify(marker.body));

        second = await liveApp(sim, {
          testStore,
          existing: { instanceId: first.instanceId, liveKey: first.liveKey },
        });
        assert.equal(await second.t.services.sessions.restoreAll(), 1);
        await waitForStatus(second, true, true);
        await waitForWebhook(
          receiver,
          (b) => b.type === 'Message' && b.event.info.id === marker.body.id,
          'the marker, handed over after the call stanzas',
        );

        assert.deepEqual(
          {
            missed: await loggedStatuses(second, missedId),
            rejected: await loggedStatuses(second, rejectedId),
          },
          { missed: ['offer', 'missed'], rejected: ['offer', 'rejected'] },
        );
      } finally {
        await second?.t.close();
        if (firstOpen) await first.t.close();
      }
    });
  });
}
