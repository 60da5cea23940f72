import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { pixelFramesGif } from '../support/gif.ts';
import { declaredPng } from '../support/png.ts';
import { createTestStore, storeOutage, testDialects } from '../support/store.ts';
import { post, sentRows } from './idempotency-support.ts';

/**
 * What an `Idempotency-Key` keeps and frees (docs/api.md#idempotency, docs/decisions/0010-idempotency.md): an answer
 * the store failed to keep is kept later, never freed; a 429, a 400 and a 413 are freed whoever found them; a request
 * to another instance through `x-instance-id` is another request.
 */

for (const dialect of testDialects()) {
  describe(`Idempotency-Key: the answer of a send that went out is never lost [${dialect}]`, () => {
    let t: TestApp;
    let failKeep = 0;
    before(async () => {
      const testStore = await createTestStore(dialect, {
        faults: (text) => {
          if (failKeep > 0 && /^update "idempotency_keys" set "status"/.test(text)) {
            failKeep -= 1;
            throw storeOutage(dialect);
          }
        },
      });
      t = await appFor(dialect, { testStore });
      await loginSandbox(t, OWN);
    });
    after(async () => {
      await t.close();
      await t.testStore.cleanup();
    });

    it('a store blip while keeping a 200 does not free the key: the retry never sends a second message', async () => {
      const headers = { 'idempotency-key': 'blip-1' };
      const payload = JSON.stringify({ phone: PEER, body: 'sent once' });
      const before = await sentRows(t);
      failKeep = 1;
      const first = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(failKeep, 0, 'the keep was faulted');
      // The client did not hear the 200 and retries with the key, as docs/api.md tells it to.
      const replay = await eventually('the retry to be answered', async () => {
        const again = await post(t, '/v1/messages/send', payload, headers);
        return again.statusCode === 409 ? undefined : again;
      });
      const sent = (await sentRows(t)).filter((id) => !before.includes(id));
      assert.deepEqual(sent, [JSON.parse(first.body).data.id], 'one message for one key');
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.equal(replay.body, first.body);
    });
  });

  describe(`Idempotency-Key: a "retry later" answer is not kept for a day [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('a synchronous send held back by the pace (429, retryAfter) runs when retried once the pace allows it', async () => {
      const cap = await t.call('PUT', '/v1/session/pacing', {
        minIntervalMs: 0,
        jitterMs: 0,
        newChatsPerDay: 0,
      });
      assert.equal(cap.status, 200, JSON.stringify(cap.body));
      const headers = { 'idempotency-key': 'paced-1' };
      const payload = JSON.stringify({ phone: '5511999990777', body: 'a new chat' });
      const held = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(held.statusCode, 429, held.body);
      const retryAfter = JSON.parse(held.body).error.retryAfter;
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, held.body);
      assert.equal(held.headers['retry-after'], String(retryAfter));
      // The operator lifts the cap; the client retries with the same key as the 429 told it.
      const lifted = await t.call('PUT', '/v1/session/pacing', {
        minIntervalMs: 0,
        jitterMs: 0,
        newChatsPerDay: null,
      });
      assert.equal(lifted.status, 200, JSON.stringify(lifted.body));
      const retry = await post(t, '/v1/messages/send', payload, headers);
      assert.equal(
        retry.statusCode,
        200,
        `replayed=${retry.headers['idempotent-replayed']} retry-after=${retry.headers['retry-after']} ${retry.body}`,
      );
    });
  });

  describe(`Idempotency-Key: a 400 or 413 for the input is not kept, whoever finds it [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('a send whose sendAt is past is refused; fixed and sent again with the same key, it runs', async () => {
      const headers = { 'idempotency-key': 'reminder-7' };
      const at = (ms: number) => new Date(t.clock() + ms).toISOString();
      const past = await post(
        t,
        '/v1/messages/send',
        JSON.stringify({ phone: PEER, body: 'reminder', sendAt: at(-60_000) }),
        headers,
      );
      assert.equal(past.statusCode, 400, past.body);
      assert.equal(JSON.parse(past.body).error.message, 'sendAt must be in the future');
      // docs/api.md "Idempotency": "A request refused before it ran is not kept either: a 400 for its body [...]
      // Fix it and send it again with the same key."
      const fixed = await post(
        t,
        '/v1/messages/send',
        JSON.stringify({ phone: PEER, body: 'reminder', sendAt: at(3_600_000) }),
        headers,
      );
      assert.equal(fixed.statusCode, 202, fixed.body);
    });

    it('an image the operation finds too large (413) is refused; a smaller one with the same key runs', async () => {
      const headers = { 'idempotency-key': 'picture-9' };
      const image = (bytes: Buffer, type: string) =>
        JSON.stringify({ phone: PEER, image: `data:${type};base64,${bytes.toString('base64')}` });
      // 64,000,000 pixels, past the 32,000,000 a picture may have: found from its bytes, by the operation.
      const huge = await post(
        t,
        '/v1/messages/send/image',
        image(declaredPng(8000, 8000), 'image/png'),
        headers,
      );
      assert.equal(huge.statusCode, 413, huge.body);
      const fixed = await post(
        t,
        '/v1/messages/send/image',
        image(pixelFramesGif(1, 10, 10), 'image/gif'),
        headers,
      );
      assert.equal(fixed.statusCode, 200, fixed.body);
      assert.equal(fixed.headers['idempotent-replayed'], undefined);
    });
  });

  describe(`Idempotency-Key on the gateway form: the instance is part of the request [${dialect}]`, () => {
    let t: TestApp;
    let second: string;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      second = (await t.newInstance('test', 'second')).id;
      await loginSandbox(t, '5511999990003', second);
    });
    after(() => t.close());

    it("the same key and body sent through another instance is not answered with the first instance's send", async () => {
      const payload = JSON.stringify({ phone: PEER, message: 'order 1042 is confirmed' });
      const key = { 'idempotency-key': 'order-1042' };
      const a = await post(t, '/chat/send/text', payload, { ...key, 'x-instance-id': t.instance.id });
      assert.equal(a.statusCode, 200, a.body);
      const b = await post(t, '/chat/send/text', payload, { ...key, 'x-instance-id': second });
      const sentBySecond = await sentRows(t, second);
      // Either refused as another request (422), or run: never a 200 naming a message the second instance never sent.
      assert.ok(
        b.statusCode === 422 || (b.statusCode === 200 && sentBySecond.length === 1),
        `second instance: ${b.statusCode} replayed=${b.headers['idempotent-replayed']} ${b.body}; its sends: ${sentBySecond.length}`,
      );
    });
  });
}
