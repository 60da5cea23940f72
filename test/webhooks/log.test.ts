import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { createWebhookApp, deliveries, recordMessages, textMessage, waitForLog } from './support.ts';

for (const dialect of testDialects()) {
  describe(`webhook configuration and delivery log over HTTP (${dialect})`, () => {
    let receiver: Receiver;
    let t: TestApp;
    before(async () => {
      receiver = await startReceiver();
      // Three or more test instances: the pro plan (free allows 2, docs/decisions/0029-instances-over-the-api.md).
      t = await createWebhookApp({ dialect, plan: { plan: 'pro' } });
    });
    after(async () => {
      await t.close();
      await receiver.close();
    });

    it('GET /v1/webhook before any configuration: empty URL, default subscription (docs/decisions/0016-session-lifecycle.md), enabled', async () => {
      const response = await t.call('GET', '/v1/webhook');
      assert.deepEqual(response.body, {
        success: true,
        code: 200,
        data: {
          webhook: '',
          subscribe: ['Message', 'ReadReceipt', 'HistorySync', 'ChatPresence'],
          disabled: false,
          disabledAt: null,
          disabledReason: null,
        },
      });
    });

    it('POST /v1/webhook validates the URL (docs/decisions/0001-envelope-and-error-codes.md, docs/decisions/0020-security-promises.md) and needs chat:webhook', async () => {
      const cases: [unknown, string][] = [
        [{}, 'webhookUrl is required'],
        [{ webhookUrl: 'http://example.com/hook' }, 'webhookUrl must be an HTTPS URL'],
        [{ webhookUrl: 'ftp://example.com/hook' }, 'webhookUrl must be an HTTPS URL'],
        [{ webhookUrl: 'not a url' }, 'webhookUrl must be an HTTPS URL'],
        [
          { webhookUrl: 'https://user:pw@example.com/hook' },
          'webhookUrl must be an HTTPS URL: URL must not contain a username or password',
        ],
        [
          { webhookUrl: 'https://10.1.2.3/hook' },
          'webhookUrl is refused: the host does not resolve to an allowed public address',
        ],
        [
          { webhookUrl: 'https://169.254.169.254/latest' },
          'webhookUrl is refused: the host does not resolve to an allowed public address',
        ],
        [{ webhookUrl: 42 }, 'webhookUrl must be a string'],
      ];
      for (const [body, message] of cases) {
        const response = await t.call('POST', '/v1/webhook', body);
        assert.equal(response.status, 400, JSON.stringify(body));
        assert.deepEqual(response.body, { error: { code: 400, message } }, JSON.stringify(body));
      }
      assert.equal((await t.call('GET', '/v1/webhook')).body.data.webhook, '', 'nothing was stored');
      const narrow = await t.newKey({ scopes: ['chat:messages'] });
      const forbidden = await t.call(
        'POST',
        '/v1/webhook',
        { webhookUrl: receiver.url },
        {
          authorization: `Bearer ${narrow}`,
        },
      );
      assert.deepEqual(forbidden.body, {
        error: { code: 403, message: 'API key lacks required scope chat:webhook' },
      });
      const scoped = await t.newKey({ scopes: ['chat:webhook'] });
      const allowed = await t.call(
        'POST',
        '/v1/webhook',
        { webhookUrl: receiver.url },
        {
          authorization: `Bearer ${scoped}`,
        },
      );
      assert.deepEqual(allowed.body, { success: true, code: 200, data: { webhook: receiver.url } });
      assert.equal((await t.call('GET', '/v1/webhook')).body.data.webhook, receiver.url);
    });

    it('lists events newest first with cursor pagination, status filter and attempts; redelivers unsent events', async () => {
      const other = await t.newInstance('test', 'other');
      // Three events recorded while no URL is configured on `other`, then five delivered after it is set.
      for (let i = 1; i <= 3; i++) {
        await t.services.recorder.record(other.id, textMessage(`early${i}`));
      }
      const from = `from=${other.id}`;
      const set = await t.call('POST', `/v1/webhook?${from}`, { webhookUrl: receiver.url });
      assert.equal(set.status, 200);
      for (let i = 1; i <= 5; i++) {
        await t.services.recorder.record(other.id, textMessage(`late${i}`));
      }
      await waitForLog(
        t,
        (e) => e.filter((x) => x.status === 'delivered').length === 5,
        10_000,
        `${from}&limit=100`,
      );

      const seen: any[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: any = (await deliveries(t, `${from}&limit=3${cursor ? `&cursor=${cursor}` : ''}`)).body
          .data;
        seen.push(...page.deliveries);
        cursor = page.nextCursor;
        pages += 1;
      } while (cursor !== null);
      assert.equal(pages, 3);
      assert.deepEqual(
        seen.map((e) => [e.sequence, e.status]),
        [
          [8, 'delivered'],
          [7, 'delivered'],
          [6, 'delivered'],
          [5, 'delivered'],
          [4, 'delivered'],
          [3, 'unsent'],
          [2, 'unsent'],
          [1, 'unsent'],
        ],
      );
      const delivered = seen[0];
      assert.equal(delivered.type, 'Message');
      assert.equal(delivered.payload.event.message.conversation, 'late5');
      assert.equal(delivered.payload.instanceId, other.id);
      assert.equal(delivered.nextAttemptAt, null);
      assert.equal(delivered.deliveredAt, new Date(t.clock()).toISOString());
      assert.equal(delivered.attempts.length, 1);
      const [attempt] = delivered.attempts;
      assert.deepEqual(Object.keys(attempt).sort(), [
        'at',
        'durationMs',
        'error',
        'finishedAt',
        'number',
        'responseBody',
        'responseTruncated',
        'statusCode',
        'url',
      ]);
      assert.equal(attempt.number, 1);
      assert.equal(attempt.statusCode, 200);
      assert.equal(attempt.responseBody, 'ok');
      assert.equal(attempt.responseTruncated, false);
      assert.ok(Number.isInteger(attempt.durationMs) && attempt.durationMs >= 0);

      const unsent = (await deliveries(t, `${from}&status=unsent`)).body.data;
      assert.deepEqual(
        unsent.deliveries.map((e: any) => [e.sequence, e.reason]),
        [
          [3, 'no webhook URL configured'],
          [2, 'no webhook URL configured'],
          [1, 'no webhook URL configured'],
        ],
      );
      assert.equal(unsent.nextCursor, null);
      assert.equal((await deliveries(t, `${from}&status=delivered`)).body.data.deliveries.length, 5);
      // A status filter pages newest first with the cursor too (read from the lane's deliveries in that status).
      const firstDelivered = (await deliveries(t, `${from}&status=delivered&limit=3`)).body.data;
      const restDelivered = (
        await deliveries(t, `${from}&status=delivered&limit=3&cursor=${firstDelivered.nextCursor}`)
      ).body.data;
      assert.deepEqual(
        [...firstDelivered.deliveries, ...restDelivered.deliveries].map((e: any) => e.sequence),
        [8, 7, 6, 5, 4],
      );
      assert.equal(restDelivered.nextCursor, null);
      assert.equal((await deliveries(t, `${from}&status=failed`)).body.data.deliveries.length, 0);
      // The other instance's log is separate.
      assert.ok(
        (await deliveries(t, `from=${t.instance.id}`)).body.data.deliveries.every(
          (e: any) => e.payload.instanceId === t.instance.id,
        ),
      );

      // Redeliver an event that was never sent: it goes out now.
      const oldest = unsent.deliveries[2];
      const before = receiver.requests.length;
      const redeliver = await t.call('POST', `/v1/webhook/deliveries/${oldest.id}/redeliver?${from}`);
      assert.deepEqual(redeliver.body, {
        success: true,
        code: 200,
        data: { details: 'Queued for redelivery', id: oldest.id },
      });
      const [request] = (await receiver.waitForCount(before + 1, 10_000)).slice(before);
      assert.equal(request?.headers['webhook-id'], oldest.id);
      assert.equal(JSON.parse(request?.body.toString('utf8') ?? '{}').sequence, 1);
      await waitForLog(
        t,
        (e) => e.find((x) => x.id === oldest.id)?.status === 'delivered',
        10_000,
        `${from}&limit=100`,
      );

      // An id of another instance is not found through this one (no existence leak), nor is a made-up id.
      const wrongInstance = await t.call(
        'POST',
        `/v1/webhook/deliveries/${oldest.id}/redeliver?from=${t.instance.id}`,
      );
      assert.deepEqual(wrongInstance.body, { error: { code: 404, message: 'delivery not found' } });
      const unknown = await t.call(
        'POST',
        `/v1/webhook/deliveries/00000000-0000-4000-8000-000000000000/redeliver?${from}`,
      );
      assert.deepEqual(unknown.body, { error: { code: 404, message: 'delivery not found' } });
    });

    it('filters by event type, with the status filter and the cursor', async () => {
      const other = await t.newInstance('test', 'typed');
      const from = `from=${other.id}`;
      await t.call('POST', `/v1/webhook?${from}`, { webhookUrl: receiver.url });
      const source = {
        chat: '5511988887777@s.whatsapp.net',
        sender: '5511988887777@s.whatsapp.net',
        isFromMe: false,
        isGroup: false,
      };
      for (let i = 1; i <= 3; i++) {
        await t.services.recorder.record(other.id, textMessage(`typed${i}`));
        await t.services.recorder.record(other.id, {
          type: 'receipt',
          state: 'read',
          messageIds: [`M${i}`],
          source,
          timestamp: Date.UTC(2025, 0, 2),
        });
      }
      const receipts = (await deliveries(t, `${from}&types=ReadReceipt&limit=2`)).body.data;
      assert.deepEqual(
        receipts.deliveries.map((e: any) => [e.sequence, e.type]),
        [
          [6, 'ReadReceipt'],
          [4, 'ReadReceipt'],
        ],
      );
      const rest = (await deliveries(t, `${from}&types=ReadReceipt&limit=2&cursor=${receipts.nextCursor}`))
        .body.data;
      assert.deepEqual(
        rest.deliveries.map((e: any) => [e.sequence, e.type]),
        [[2, 'ReadReceipt']],
      );
      assert.equal(rest.nextCursor, null);
      const both = (await deliveries(t, `${from}&types=Message, ReadReceipt&limit=100`)).body.data;
      assert.equal(both.deliveries.length, 6);
    });

    it('rejects a bad status, limit or cursor naming the field', async () => {
      const cases: [string, string][] = [
        ['status=bogus', 'status must be one of pending, delivered, failed, unsent'],
        ['limit=0', 'limit must be an integer from 1 to 100'],
        ['limit=101', 'limit must be an integer from 1 to 100'],
        ['limit=abc', 'limit must be an integer from 1 to 100'],
        ['cursor=garbage', 'cursor is invalid'],
        [
          'types=Message,Mesage',
          'types contains unknown event type Mesage (allowed: Message, ReadReceipt, HistorySync, ChatPresence, MessageUpdate, GroupUpdate, Call, PollVote, SessionStatus, MessageStatus)',
        ],
      ];
      for (const [query, message] of cases) {
        const response = await t.call('GET', `/v1/webhook/deliveries?from=${t.instance.id}&${query}`);
        assert.deepEqual(response.body, { error: { code: 400, message } }, query);
      }
    });

    it('redelivery needs a configured URL', async () => {
      const bare = await t.newInstance('test', 'bare');
      await recordMessages({ ...t, instance: bare } as TestApp, 1);
      const [entry] = (await deliveries(t, `from=${bare.id}`)).body.data.deliveries;
      const response = await t.call('POST', `/v1/webhook/deliveries/${entry.id}/redeliver?from=${bare.id}`);
      assert.deepEqual(response.body, { error: { code: 409, message: 'no webhook URL configured' } });
    });

    it('stores at most 2 KB of a response body and says it was cut', async () => {
      const big = await startReceiver({ fallback: { status: 200, body: 'x'.repeat(5000) } });
      try {
        const instance = await t.newInstance('test', 'big');
        const app = { ...t, instance } as TestApp;
        await t.call('POST', `/v1/webhook?from=${instance.id}`, { webhookUrl: big.url });
        await recordMessages(app, 1);
        const [entry] = await waitForLog(
          t,
          (e) => e[0]?.status === 'delivered',
          10_000,
          `from=${instance.id}`,
        );
        assert.equal(entry.attempts[0].responseBody, 'x'.repeat(2048));
        assert.equal(entry.attempts[0].responseTruncated, true);
      } finally {
        await big.close();
      }
    });
  });
}
