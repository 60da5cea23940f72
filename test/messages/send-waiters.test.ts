import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SentMessage } from '../../src/domain/messages.ts';
import { settledFlag } from '../sends/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { appFor, OWN, PEER, pendingSyncJobId, sendJobRow } from './support.ts';

/**
 * A synchronous send whose client stops waiting (docs/decisions/0009-sends-as-jobs.md,
 * docs/decisions/0012-session-and-message-status-events.md): the job goes on, and its outcome, which the answer
 * would have carried, is recorded as a `MessageStatus` event instead, whether the client left before the outcome
 * was recorded or after, and whether the engine then failed; a second forward of the send that leaves does not take
 * the outcome from the first. The other sends as jobs: send-jobs.test.ts.
 */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const ASYNC = { prefer: 'respond-async' };

for (const dialect of testDialects()) {
  describe(`sends as jobs: a client that stops waiting [${dialect}]`, () => {
    let t: TestApp;
    const job = (id: string) => sendJobRow(t, id);

    before(async () => {
      t = await appFor(dialect);
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('a synchronous send whose client went away stops waiting: its outcome is recorded as a MessageStatus event', async () => {
      const statusEvents = async (id: string) =>
        (
          await t.services.store.db
            .selectFrom('webhook_events')
            .select('payload')
            .where('instance_id', '=', t.instance.id)
            .where('type', '=', 'MessageStatus')
            .execute()
        )
          .map((row) => JSON.parse(row.payload).event)
          .filter((event) => event.id === id);
      await t.call('PUT', '/v1/session/pacing', { minIntervalMs: 5000, jitterMs: 0 });
      try {
        // A first send sets the pace: the next waits 5 s for its turn.
        const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'pace' }, ASYNC);
        await eventually(
          'the first paced send',
          async () => (await job(first.body.data.id)).status === 'sent',
        );
        await t.app.listen({ port: 0, host: '127.0.0.1' });
        const address = t.app.server.address();
        assert.ok(address !== null && typeof address === 'object');
        const client = new AbortController();
        const answered = fetch(`http://127.0.0.1:${address.port}/v1/messages/send`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ phone: PEER, body: 'gone' }),
          signal: client.signal,
        });
        answered.catch(() => undefined);
        const waitingId = await eventually('the send stored, waiting its turn', () => pendingSyncJobId(t));
        client.abort();
        await assert.rejects(answered);
        // The server saw the connection close (the request's wait withdrawn with it).
        await eventually(
          'the connection closed on the server',
          () =>
            new Promise<boolean>((resolve) =>
              t.app.server.getConnections((_error, count) => resolve(count === 0)),
            ),
        );
        t.clock.advance(5000);
        t.services.sendQueue.wake(t.instance.id);
        const events = await eventually('the MessageStatus of the send whose client went away', async () => {
          const found = await statusEvents(waitingId);
          return found.length > 0 ? found : undefined;
        });
        assert.deepEqual(events, [{ id: waitingId, status: 'sent', at: new Date(t.clock()).toISOString() }]);
      } finally {
        await t.call('PUT', '/v1/session/pacing', {});
        t.clock.set(T0);
      }
    });

    /**
     * A synchronous send whose platform acknowledges and whose message is recorded (its event left out for the
     * waiting request), whose client then goes away before the relay answers, and whose engine then ends with
     * `after` (returns the sent message, or throws): the outcome must become one `MessageStatus sent` event.
     */
    async function goneAfterRecorded(body: string, after: (sent: SentMessage) => SentMessage) {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session, 'the instance has a session');
      await t.app.listen({ port: 0, host: '127.0.0.1' }).catch(() => undefined);
      const address = t.app.server.address();
      assert.ok(address !== null && typeof address === 'object');
      const client = new AbortController();
      const relay = session.send.bind(session);
      session.send = async (message) => {
        const sent = await relay(message);
        client.abort();
        await eventually(
          'the connection closed on the server',
          () =>
            new Promise<boolean>((resolve) =>
              t.app.server.getConnections((_error, count) => resolve(count === 0)),
            ),
        );
        return after(sent);
      };
      try {
        const answered = fetch(`http://127.0.0.1:${address.port}/v1/messages/send`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ phone: PEER, body }),
          signal: client.signal,
        });
        await assert.rejects(answered);
        const sent = await eventually('the send recorded sent', async () => {
          const rows = await t.services.store.db
            .selectFrom('send_jobs')
            .select(['id', 'status', 'sent_at'])
            .where('instance_id', '=', t.instance.id)
            .where('kind', '=', 'text')
            .where('status', '=', 'sent')
            .orderBy('seq', 'desc')
            .limit(1)
            .execute();
          return rows[0];
        });
        const payloads = await eventually('the MessageStatus of the send', async () => {
          const rows = await t.services.store.db
            .selectFrom('webhook_events')
            .select('payload')
            .where('instance_id', '=', t.instance.id)
            .where('type', '=', 'MessageStatus')
            .execute();
          const found = rows
            .map((row) => JSON.parse(row.payload).event)
            .filter((event) => event.id === sent.id);
          return found.length > 0 ? found : undefined;
        });
        assert.deepEqual(payloads, [
          { id: sent.id, status: 'sent', at: new Date(Number(sent.sent_at)).toISOString() },
        ]);
      } finally {
        session.send = relay;
      }
    }

    it('a synchronous send whose client goes away after its outcome was recorded, before its answer: the outcome becomes a MessageStatus event', async () => {
      await goneAfterRecorded('gone after its outcome', (sent) => sent);
    });

    it('the same when the engine then fails (its message out and recorded): the job stays sent, its outcome an event', async () => {
      await goneAfterRecorded('gone, then the engine failed', () => {
        throw new DomainError('timeout', 'the platform did not confirm the message in time');
      });
    });

    it('a second forward of a synchronous send whose client went away stops waiting; the first still gets the outcome', async () => {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session, 'the instance has a session');
      const relay = session.send.bind(session);
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let relaying = false;
      session.send = async (message) => {
        relaying = true;
        await released;
        return relay(message);
      };
      try {
        const { messaging } = t.services.app;
        const content = () => ({ kind: 'text' as const, text: 'forwarded twice', linkPreview: false });
        const forwardId = '0b6f6a52-2f8e-4a53-9d3c-6f1f3c1d2e01';
        const first = messaging.send(t.instance, { phone: PEER }, content, { forwardId });
        await eventually('the first forward relaying', () => relaying);
        const client = new AbortController();
        const second = messaging.send(t.instance, { phone: PEER }, content, {
          forwardId,
          signal: client.signal,
        });
        const secondSettled = settledFlag(second);
        client.abort(new Error('the second forward closed its connection'));
        // Withdrawn while the relay still runs: it no longer waits on behalf of a client that left.
        await eventually('the second forward withdrawn before the relay ends', () => secondSettled());
        await assert.rejects(second, /the second forward closed its connection/);
        release();
        const sent = await first;
        const row = await t.services.store.db
          .selectFrom('send_jobs')
          .select(['status'])
          .where('instance_id', '=', t.instance.id)
          .where('id', '=', sent.id)
          .executeTakeFirstOrThrow();
        assert.equal(row.status, 'sent');
      } finally {
        release();
        session.send = relay;
      }
    });
  });
}
