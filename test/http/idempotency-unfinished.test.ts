/**
 * A request with an `Idempotency-Key` whose answer decided nothing (a `5xx` other than a refusal of the operation:
 * its client left mid-send, its outcome not known yet) ends its claim unfinished, and the retry with the key
 * continues the same request (docs/decisions/0010-idempotency.md): a synchronous send whose client closed its
 * connection while the message was being relayed, then retried with its key, finds the send's job and answers its
 * outcome, so the message goes out once. Before, the `504` released the key and the retry stored a second send under a
 * new id. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { IDEMPOTENCY_LOCK_MS, IDEMPOTENCY_TTL_MS, RequestFingerprint } from '../../src/app/idempotency.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { appFor, bad, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { post, sentRows } from './idempotency-support.ts';

const REUSED = bad(422, 'Idempotency-Key reused with a different request');
const text = (body: string) => JSON.stringify({ phone: PEER, body });

for (const dialect of testDialects()) {
  describe(`an idempotent send whose client left, retried with its key [${dialect}]`, () => {
    let t: TestApp;
    const sockets: Socket[] = [];

    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      t.app.server.on('connection', (socket: Socket) => {
        sockets.push(socket);
      });
      await t.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => t.close());

    it('answers the first send, and sends the message once', async () => {
      const address = t.app.server.address();
      assert.ok(address && typeof address === 'object');
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      const relay = session.send.bind(session);
      const client = new AbortController();
      let relays = 0;
      session.send = async (message) => {
        relays += 1;
        if (relays === 1) {
          // The client gives up while its message is being relayed; the relay goes on once the server saw it leave.
          client.abort();
          await eventually('the client connection closed', () => sockets.every((socket) => socket.destroyed));
        }
        return relay(message);
      };
      const before = await sentRows(t);
      const payload = JSON.stringify({ phone: PEER, body: 'once, whatever the client does' });
      await assert.rejects(
        fetch(`http://127.0.0.1:${address.port}/v1/messages/send`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${t.key}`,
            'content-type': 'application/json',
            'idempotency-key': 'left-mid-send',
          },
          body: payload,
          signal: client.signal,
        }),
      );
      const [first] = await eventually('the first send went out', async () => {
        const sent = (await sentRows(t)).filter((id) => !before.includes(id));
        return sent.length > 0 && sent;
      });
      const claim = await eventually('the claim ended unfinished', async () => {
        const row = await t.services.store.db
          .selectFrom('idempotency_keys')
          .select(['status', 'locked_until', 'request_id'])
          .where('key', '=', 'left-mid-send')
          .executeTakeFirst();
        return row !== undefined && Number(row.locked_until) === 0 && row;
      });
      assert.equal(claim.status, null, 'no answer kept: the 504 went to nobody');

      const retried = await post(t, '/v1/messages/send', payload, { 'idempotency-key': 'left-mid-send' });
      assert.equal(retried.statusCode, 200, retried.body);
      assert.equal(retried.headers['idempotent-replayed'], undefined, 'run again, as the same request');
      assert.equal(JSON.parse(retried.body).data.id, first, "the first send's message");
      assert.deepEqual(
        (await sentRows(t)).filter((id) => !before.includes(id)),
        [first],
        'one message for one key',
      );
      assert.equal(relays, 1, 'relayed once');

      const replayed = await post(t, '/v1/messages/send', payload, { 'idempotency-key': 'left-mid-send' });
      assert.equal(replayed.headers['idempotent-replayed'], 'true', 'the answer is kept now');
      assert.equal(JSON.parse(replayed.body).data.id, first);
    });
  });
}

/**
 * The key of a request whose run ended unfinished is the first request's until it expires
 * (docs/decisions/0010-idempotency.md: the same key with another fingerprint is a 422): after an undecided 504, or
 * once a dead process's claim passed its lock, the same request continues and another one is refused, since the
 * first run's work may still go on. Before, the other request ran as a new one.
 */
for (const dialect of testDialects()) {
  describe(`a key whose first run ended unfinished, reused with another body [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    const group = (name: string) => JSON.stringify({ name, participants: [PEER] });

    it('after an undecided 504 another body is 422; the same body continues the request', async () => {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      const createGroup = session.createGroup.bind(session);
      const names: string[] = [];
      session.createGroup = async (...args: Parameters<typeof createGroup>) => {
        names.push(args[0]);
        if (names.length === 1) throw new DomainError('timeout', 'the platform did not answer in time');
        return createGroup(...args);
      };
      const headers = { 'idempotency-key': 'group-undecided' };
      const first = await post(t, '/v1/groups/create', group('Team A'), headers);
      assert.equal(first.statusCode, 504, first.body);
      const other = await post(t, '/v1/groups/create', group('Team B'), headers);
      assert.deepEqual([other.statusCode, JSON.parse(other.body)], [422, REUSED]);
      const same = await post(t, '/v1/groups/create', group('Team A'), headers);
      assert.equal(same.statusCode, 200, same.body);
      assert.deepEqual(names, ['Team A', 'Team A'], 'Team B never ran');
    });

    it("once a dead process's claim passed its lock, another body is 422; the same body takes it over", async () => {
      const now = t.clock();
      const payload = text('orphaned, then reused');
      const fingerprint = new RequestFingerprint('POST', '/v1/messages/send');
      fingerprint.update(Buffer.from(payload));
      await t.services.store.db
        .insertInto('idempotency_keys')
        .values({
          org_id: t.org.id,
          env: 'test',
          key: 'orphan-reused',
          fingerprint: fingerprint.digest(),
          token: '00000000-0000-4000-8000-000000000000',
          locked_until: now + IDEMPOTENCY_LOCK_MS,
          status: null,
          content_type: null,
          body: null,
          created_at: now,
          expires_at: now + IDEMPOTENCY_TTL_MS,
        })
        .execute();
      t.clock.advance(IDEMPOTENCY_LOCK_MS + 1);
      const headers = { 'idempotency-key': 'orphan-reused' };
      const before = await sentRows(t);
      const other = await post(t, '/v1/messages/send', text('another message'), headers);
      assert.deepEqual([other.statusCode, JSON.parse(other.body)], [422, REUSED]);
      assert.deepEqual(
        (await sentRows(t)).filter((id) => !before.includes(id)),
        [],
        'nothing sent',
      );
      const same = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(same.statusCode, 200, same.body);
    });
  });
}
