import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { IDEMPOTENCY_LOCK_MS, IDEMPOTENCY_TTL_MS, RequestFingerprint } from '../../src/app/idempotency.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { appFor, bad, fixture, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { type Receiver, startReceiver, TEST_CA } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { post, sentRows } from './idempotency-support.ts';

/** `Idempotency-Key` on POSTs (docs/api.md "Idempotency", docs/decisions/0010-idempotency.md). */

const IN_PROGRESS = bad(409, 'a request with this Idempotency-Key is in progress');
const REUSED = bad(422, 'Idempotency-Key reused with a different request');
const BAD_KEY = bad(400, 'Idempotency-Key must be 1 to 255 printable ASCII characters');

/** Rows of the idempotency table for one key. */
async function keyRows(t: TestApp, key: string) {
  return t.services.store.db.selectFrom('idempotency_keys').selectAll().where('key', '=', key).execute();
}

const text = (body: string, phone = PEER) => JSON.stringify({ phone, body });

for (const dialect of testDialects()) {
  describe(`Idempotency-Key on POSTs [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    before(async () => {
      t = await appFor(dialect, { env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' }, outboundCa: TEST_CA });
      await loginSandbox(t, OWN);
      receiver = await startReceiver({ path: '/slow.png' });
    });
    after(async () => {
      await receiver.close();
      await t.close();
    });

    it('a retry answers the kept status and body byte for byte, marked replayed, and sends nothing', async () => {
      const before = await sentRows(t);
      const payload = text('replay me');
      const first = await post(t, '/v1/messages/send', payload, { 'idempotency-key': 'order-1' });
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(first.headers['idempotent-replayed'], undefined);
      const again = await post(t, '/v1/messages/send', payload, { 'idempotency-key': 'order-1' });
      assert.equal(again.statusCode, 200);
      assert.equal(again.body, first.body);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.headers['content-type'], first.headers['content-type']);
      assert.notEqual(again.headers['x-request-id'], first.headers['x-request-id']);
      const sent = await sentRows(t);
      assert.deepEqual(
        sent.filter((id) => !before.includes(id)),
        [JSON.parse(first.body).data.id],
      );
    });

    it("a replay of a queued send carries the first answer's Preference-Applied", async () => {
      const payload = text('queue me');
      const headers = { 'idempotency-key': 'order-async', prefer: 'respond-async' };
      const first = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(first.statusCode, 202, first.body);
      assert.equal(first.headers['preference-applied'], 'respond-async');
      const again = await post(t, '/v1/messages/send', payload, headers);
      assert.deepEqual(
        [
          again.statusCode,
          again.body,
          again.headers['preference-applied'],
          again.headers['idempotent-replayed'],
        ],
        [202, first.body, 'respond-async', 'true'],
      );
      const [row] = await keyRows(t, 'order-async');
      assert.equal(row?.headers, '{"preference-applied":"respond-async"}');
      // A kept answer with none has none on replay.
      const sync = await post(t, '/v1/messages/send', text('no preference'), {
        'idempotency-key': 'order-sync',
      });
      const replayed = await post(t, '/v1/messages/send', text('no preference'), {
        'idempotency-key': 'order-sync',
      });
      assert.equal(sync.headers['preference-applied'], undefined);
      assert.deepEqual([replayed.statusCode, replayed.headers['preference-applied']], [200, undefined]);
      assert.equal((await keyRows(t, 'order-sync'))[0]?.headers, null);
    });

    it('without the header nothing changes: each request runs', async () => {
      const before = (await sentRows(t)).length;
      const a = await post(t, '/v1/messages/send', text('twice'));
      const b = await post(t, '/v1/messages/send', text('twice'));
      assert.equal(a.statusCode, 200);
      assert.equal(b.statusCode, 200);
      assert.notEqual(JSON.parse(a.body).data.id, JSON.parse(b.body).data.id);
      assert.equal(b.headers['idempotent-replayed'], undefined);
      assert.equal((await sentRows(t)).length, before + 2);
    });

    it('the key reused with another body, path or method is 422; the kept answer stays', async () => {
      const headers = { 'idempotency-key': 'order-2' };
      const first = await post(t, '/v1/messages/send', text('one'), headers);
      assert.equal(first.statusCode, 200, first.body);
      const count = (await sentRows(t)).length;
      const otherBody = await post(t, '/v1/messages/send', text('two'), headers);
      assert.deepEqual(JSON.parse(otherBody.body), REUSED);
      // The same JSON value written differently is another body: the fingerprint is over the bytes sent.
      const spaced = await post(t, '/v1/messages/send', text('one').replace(',', ', '), headers);
      assert.deepEqual(JSON.parse(spaced.body), REUSED);
      const otherPath = await post(t, `/v1/messages/send?from=${t.instance.id}`, text('one'), headers);
      assert.deepEqual(JSON.parse(otherPath.body), REUSED);
      assert.equal((await sentRows(t)).length, count);
      const again = await post(t, '/v1/messages/send', text('one'), headers);
      assert.equal(again.body, first.body);
      assert.equal(again.headers['idempotent-replayed'], 'true');
    });

    it('answers below 500 are kept too: a 422 is replayed, not run again', async () => {
      const headers = { 'idempotency-key': 'order-3' };
      const payload = text('hello', '5511977770000');
      const first = await post(t, '/v1/messages/send', payload, headers);
      assert.deepEqual(
        JSON.parse(first.body),
        bad(422, 'recipient 5511977770000 is not registered on the platform'),
      );
      const again = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(again.statusCode, 422);
      assert.equal(again.body, first.body);
      assert.equal(again.headers['idempotent-replayed'], 'true');
    });

    it('a validation error is not kept: the key stays free', async () => {
      const headers = { 'idempotency-key': 'order-4' };
      const invalid = await post(t, '/v1/messages/send', JSON.stringify({ phone: PEER }), headers);
      assert.deepEqual(JSON.parse(invalid.body), bad(400, 'body is required'));
      assert.deepEqual(await keyRows(t, 'order-4'), []);
      const valid = await post(t, '/v1/messages/send', text('now valid'), headers);
      assert.equal(valid.statusCode, 200, valid.body);
      assert.equal(valid.headers['idempotent-replayed'], undefined);
    });

    it('two requests at once with one key: one runs, the other gets 409, then the replay', async () => {
      let releaseMedia: () => void = () => undefined;
      const held = new Promise<void>((resolve) => {
        releaseMedia = resolve;
      });
      receiver.respondWith(async () => {
        await held;
        return { body: fixture('tiny.png') };
      });
      const before = await sentRows(t);
      const seen = receiver.requests.length;
      const payload = JSON.stringify({ phone: PEER, image: receiver.url });
      const headers = { 'idempotency-key': 'slow-1' };
      const first = post(t, '/v1/messages/send/image', payload, headers);
      await receiver.waitForCount(seen + 1, 10_000);
      const second = await post(t, '/v1/messages/send/image', payload, headers);
      assert.equal(second.statusCode, 409);
      assert.deepEqual(JSON.parse(second.body), IN_PROGRESS);
      const otherBody = await post(
        t,
        '/v1/messages/send/image',
        JSON.stringify({ phone: OWN, image: receiver.url }),
        headers,
      );
      assert.deepEqual(JSON.parse(otherBody.body), REUSED);
      releaseMedia();
      const done = await first;
      assert.equal(done.statusCode, 200, done.body);
      const third = await post(t, '/v1/messages/send/image', payload, headers);
      assert.equal(third.body, done.body);
      assert.equal(third.headers['idempotent-replayed'], 'true');
      assert.equal(receiver.requests.length, seen + 1, 'the media was fetched once');
      assert.deepEqual(
        (await sentRows(t)).filter((id) => !before.includes(id)),
        [JSON.parse(done.body).data.id],
      );
    });

    it('an answer of 500 or more releases the key: the retry runs again', async () => {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      const original = session.send.bind(session);
      session.send = async () => {
        throw new DomainError('platform_unreachable', 'the platform could not be reached');
      };
      const headers = { 'idempotency-key': 'retry-after-5xx' };
      const payload = text('after an outage');
      const failed = await post(t, '/v1/messages/send', payload, headers).finally(() => {
        session.send = original;
      });
      assert.deepEqual(JSON.parse(failed.body), bad(503, 'the platform could not be reached'));
      assert.deepEqual(await keyRows(t, 'retry-after-5xx'), []);
      const before = (await sentRows(t)).length;
      const retried = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(retried.statusCode, 200, retried.body);
      assert.equal(retried.headers['idempotent-replayed'], undefined);
      assert.equal((await sentRows(t)).length, before + 1);
    });

    it('a claim left by a process that died blocks the key until its lock passes', async () => {
      const now = t.clock();
      const payload = text('orphaned');
      const fingerprint = new RequestFingerprint('POST', '/v1/messages/send');
      fingerprint.update(Buffer.from(payload));
      const row = {
        org_id: t.org.id,
        env: 'test',
        key: 'orphan',
        fingerprint: fingerprint.digest(),
        token: '00000000-0000-4000-8000-000000000000',
        locked_until: now + IDEMPOTENCY_LOCK_MS,
        status: null,
        content_type: null,
        body: null,
        created_at: now,
        expires_at: now + IDEMPOTENCY_TTL_MS,
      };
      await t.services.store.db.insertInto('idempotency_keys').values(row).execute();
      const headers = { 'idempotency-key': 'orphan' };
      const blocked = await post(t, '/v1/messages/send', payload, headers);
      assert.deepEqual(JSON.parse(blocked.body), IN_PROGRESS);
      t.clock.advance(IDEMPOTENCY_LOCK_MS);
      const taken = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(taken.statusCode, 200, taken.body);
      const [kept] = await keyRows(t, 'orphan');
      assert.equal(kept?.status, 200);
      assert.notEqual(kept?.token, row.token);
      assert.equal(kept?.body, taken.body);
    });

    it('a kept answer lasts 24 h; then the key runs again and the purge deletes old rows', async () => {
      const headers = { 'idempotency-key': 'daily' };
      const payload = text('daily report');
      const first = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(first.statusCode, 200, first.body);
      t.clock.advance(IDEMPOTENCY_TTL_MS - 1);
      const late = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(late.headers['idempotent-replayed'], 'true');
      assert.equal(late.body, first.body);
      t.clock.advance(1);
      const count = (await sentRows(t)).length;
      const expired = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(expired.statusCode, 200, expired.body);
      assert.equal(expired.headers['idempotent-replayed'], undefined);
      assert.notEqual(JSON.parse(expired.body).data.id, JSON.parse(first.body).data.id);
      assert.equal((await sentRows(t)).length, count + 1);
      // Every row claimed before the last 24 h goes; the one just kept stays.
      t.clock.advance(1);
      assert.ok((await t.services.idempotencyPurge.runOnce()) > 0);
      const left = await t.services.store.db
        .selectFrom('idempotency_keys')
        .select(['key', 'expires_at'])
        .execute();
      assert.deepEqual(
        left.map((r) => r.key),
        ['daily'],
      );
      assert.ok(left.every((r) => Number(r.expires_at) > t.clock()));
    });

    it('keys belong to one organization: the same key in another is independent', async () => {
      const db = t.services.store.db;
      const other = await adminCreateOrg(db, {
        name: `other-${Math.random().toString(36).slice(2, 8)}`,
        plan: 'enterprise',
        perMinute: 1_000_000,
        perDay: 10_000_000,
      });
      const instance = await adminCreateInstance(db, { org: other.id, env: 'test', name: 'other' });
      const { key } = await adminCreateKey(db, { org: other.id, env: 'test' }, t.clock());
      for (const [url, body] of [
        [`/v1/session/connect?from=${instance.id}`, '{}'],
        [`/v1/sandbox/scan?from=${instance.id}`, JSON.stringify({ phone: '5511999990009' })],
      ] as const) {
        const res = await post(t, url, body, {}, key);
        assert.equal(res.statusCode, 200, res.body);
      }
      const headers = { 'idempotency-key': 'shared-key' };
      const mine = await post(t, '/v1/messages/send', text('mine'), headers);
      const theirs = await post(t, '/v1/messages/send', text('theirs'), headers, key);
      assert.equal(mine.statusCode, 200, mine.body);
      assert.equal(theirs.statusCode, 200, theirs.body);
      assert.equal(theirs.headers['idempotent-replayed'], undefined);
      assert.deepEqual(await sentRows(t, instance.id), [JSON.parse(theirs.body).data.id]);
      const replay = await post(t, '/v1/messages/send', text('theirs'), headers, key);
      assert.equal(replay.body, theirs.body);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
    });

    it('the gateway form replays too', async () => {
      const payload = JSON.stringify({ phone: PEER, message: 'through the gateway' });
      const headers = { 'idempotency-key': 'gateway-1', 'x-instance-id': t.instance.id };
      const before = await sentRows(t);
      const first = await post(t, '/chat/send/text', payload, headers);
      assert.equal(first.statusCode, 200, first.body);
      const again = await post(t, '/chat/send/text', payload, headers);
      assert.equal(again.body, first.body);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      // The gateway path and its /v1 twin are different requests.
      const twin = await post(
        t,
        '/v1/messages/send',
        JSON.stringify({ phone: PEER, body: 'through the gateway' }),
        headers,
      );
      assert.deepEqual(JSON.parse(twin.body), REUSED);
      assert.deepEqual(
        (await sentRows(t)).filter((id) => !before.includes(id)),
        [JSON.parse(first.body).data.id],
      );
    });

    it('a malformed key is 400 naming the header and the rule; 255 printable characters pass', async () => {
      for (const value of ['', 'x'.repeat(256), 'caf\u00e9', 'tab\there']) {
        const res = await post(t, '/v1/messages/send', text('never sent'), { 'idempotency-key': value });
        assert.deepEqual(JSON.parse(res.body), BAD_KEY, JSON.stringify(value));
      }
      const longest = ` ~${'k'.repeat(251)}!"`;
      assert.equal(longest.length, 255);
      const ok = await post(t, '/v1/messages/send', text('longest key'), { 'idempotency-key': longest });
      assert.equal(ok.statusCode, 200, ok.body);
    });

    it('a replay counts against the rate limit, as a first request does', async () => {
      const headers = { 'idempotency-key': 'counted' };
      const first = await post(t, '/v1/messages/send', text('counted'), headers);
      const again = await post(t, '/v1/messages/send', text('counted'), headers);
      const remaining = (res: typeof first) => Number(/r=(\d+)/.exec(String(res.headers.ratelimit))?.[1]);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(remaining(again), remaining(first) - 1);
    });

    it('other methods ignore the header', async () => {
      const res = await t.app.inject({
        method: 'GET',
        url: '/v1/session/status',
        headers: { authorization: `Bearer ${t.key}`, 'idempotency-key': '' },
      });
      assert.equal(res.statusCode, 200, res.body);
    });
  });

  describe(`idempotency claims ended by their answers [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());
    const failed = { status: 503, contentType: 'application/json', body: '{}', headers: {} };

    it('a refusal releases the key of a new request; any other 5xx keeps its request for the retry', async () => {
      const service = t.services.app.idempotency;
      const refused = { orgId: t.org.id, env: 'test', key: 'refused' };
      const first = await service.begin(refused, 'a'.repeat(64));
      assert.ok(first.kind === 'run' && !first.claim.continued);
      await service.finish(first.claim, failed, 'platform_unreachable');
      assert.deepEqual(
        await keyRows(t, 'refused'),
        [],
        'the platform could not be reached: a new request next',
      );

      const undecided = { orgId: t.org.id, env: 'test', key: 'undecided' };
      const run = await service.begin(undecided, 'a'.repeat(64));
      assert.ok(run.kind === 'run');
      await service.finish(run.claim, failed, 'store_unavailable');
      const again = await service.begin(undecided, 'a'.repeat(64));
      assert.ok(again.kind === 'run', 'taken over at once');
      assert.equal(again.claim.requestId, run.claim.requestId, 'as the same request');
      assert.equal(again.claim.continued, true);
      await service.finish(again.claim, {
        status: 200,
        contentType: 'application/json',
        body: '{}',
        headers: {},
      });
    });

    it('a run continuing an earlier one never forgets the request, whatever it answers', async () => {
      const service = t.services.app.idempotency;
      const id = { orgId: t.org.id, env: 'test', key: 'continued' };
      const first = await service.begin(id, 'b'.repeat(64));
      assert.ok(first.kind === 'run');
      await service.finish(first.claim, { ...failed, status: 504 }, 'timeout');
      const retry = await service.begin(id, 'b'.repeat(64));
      assert.ok(retry.kind === 'run' && retry.claim.continued);
      // The session is reconnecting now: a refusal, but the first run's send may still go out.
      await service.finish(retry.claim, failed, 'platform_unreachable');
      const third = await service.begin(id, 'b'.repeat(64));
      assert.ok(third.kind === 'run');
      assert.equal(third.claim.requestId, first.claim.requestId, 'still the first request');
      await service.finish(third.claim, {
        status: 429,
        contentType: 'application/json',
        body: '{}',
        headers: {},
      });
      const fourth = await service.begin(id, 'b'.repeat(64));
      assert.ok(fourth.kind === 'run');
      assert.equal(fourth.claim.requestId, first.claim.requestId, 'a 429 of a continuing run keeps it too');
    });
  });

  describe(`idempotency claims race in the store [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('of many claims at once on one key exactly one runs; the rest see it in progress', async () => {
      const service = t.services.app.idempotency;
      const id = { orgId: t.org.id, env: 'test', key: 'race' };
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, () =>
          service.begin(id, 'a'.repeat(64)).then(
            (start) => start.kind,
            (error: unknown) => (error instanceof DomainError ? error.code : String(error)),
          ),
        ),
      );
      assert.deepEqual(outcomes.filter((o) => o === 'run').length, 1, JSON.stringify(outcomes));
      assert.equal(outcomes.filter((o) => o === 'conflict').length, 11, JSON.stringify(outcomes));
      const [row] = await keyRows(t, 'race');
      assert.ok(row);
      const claim = { id, token: row.token, requestId: row.request_id ?? '', continued: false };
      const answer = {
        status: 202,
        contentType: 'application/json',
        body: '{"ok":1}',
        headers: { 'preference-applied': 'respond-async' },
      };
      await service.finish(claim, answer);
      assert.deepEqual(await service.begin(id, 'a'.repeat(64)), { kind: 'replay', answer });
    });
  });
}
