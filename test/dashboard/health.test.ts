import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { quantile } from '../../src/app/health.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createUser, type DashboardClient, signIn } from './support.ts';

const error = (code: number, message: string) => ({ error: { code, message } });
const HOUR = 60 * 60_000;

describe('quantile (nearest rank)', () => {
  it('answers the smallest value with at least q of the values at or below it', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(quantile(values, 0.5), 50);
    assert.equal(quantile(values, 0.99), 99);
    assert.equal(quantile([7], 0.99), 7);
    assert.equal(quantile([], 0.5), null);
  });
});

for (const dialect of testDialects()) {
  describe(`dashboard API: health over time from the store [${dialect}]`, () => {
    let t: TestApp;
    let viewer: DashboardClient;
    /** The start of the 24-hour window's last bucket (the hour the test app's clock is in). */
    let hour = 0;
    before(async () => {
      t = await createTestApp({ dialect });
      viewer = await signIn(t, await createUser(t, 'viewer'));
      hour = Math.floor(t.clock() / HOUR) * HOUR;
      const db = t.services.store.db;
      const instanceId = t.instance.id;
      // Two hours ago: 3 received, 1 sent. This hour: 2 sent. Outside the window: 1 received, 25 hours ago.
      const messages: [number, number][] = [
        [hour - 2 * HOUR + 1000, 0],
        [hour - 2 * HOUR + 2000, 0],
        [hour - 2 * HOUR + 3000, 0],
        [hour - 2 * HOUR + 4000, 1],
        [hour + 1000, 1],
        [hour + 2000, 1],
        [hour - 25 * HOUR, 0],
      ];
      await db
        .insertInto('messages')
        .values(
          messages.map(([timestamp, fromMe], i) => ({
            instance_id: instanceId,
            id: `HEALTH${i}`,
            chat: '5511988887777@s.whatsapp.net',
            sender: fromMe ? '' : '5511988887777@s.whatsapp.net',
            from_me: fromMe,
            is_group: 0,
            type: 'text',
            push_name: '',
            timestamp,
            content: JSON.stringify({ kind: 'text', text: `m${i}` }),
            state: 'sent',
            state_at: timestamp,
            created_at: timestamp,
          })),
        )
        .execute();
      // This hour: four attempts of 10, 20, 30 and 400 ms, the last one failed. A session connected an hour ago.
      const eventId = randomUUID();
      await db
        .insertInto('webhook_events')
        .values([
          {
            id: eventId,
            instance_id: instanceId,
            sequence: 1,
            type: 'Message',
            payload: '{}',
            skip_reason: null,
            created_at: hour,
          },
          {
            id: randomUUID(),
            instance_id: instanceId,
            sequence: 2,
            type: 'SessionStatus',
            payload: JSON.stringify({ type: 'SessionStatus', event: { status: 'connected' } }),
            skip_reason: null,
            created_at: hour - HOUR,
          },
        ])
        .execute();
      await db
        .insertInto('webhook_attempts')
        .values(
          [10, 20, 30, 400].map((duration, i) => ({
            id: randomUUID(),
            event_id: eventId,
            endpoint_id: '',
            number: i + 1,
            url: 'https://example.com/hook',
            worker: 'test',
            attempted_at: hour + i * 1000,
            finished_at: hour + i * 1000 + duration,
            status_code: i === 3 ? 500 : 200,
            duration_ms: duration,
            error: i === 3 ? 'receiver answered 500' : null,
            response_body: null,
            response_truncated: 0,
          })),
        )
        .execute();
    });
    after(() => t.close());

    it('counts messages, attempts, failures and latency per hour over 24 hours, and the session changes', async () => {
      const response = await viewer.call('GET', `/instances/${t.instance.id}/health`);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      const report = response.body.data;
      assert.equal(report.range, '24h');
      assert.equal(report.bucketMs, HOUR);
      assert.equal(report.until, hour + HOUR);
      assert.equal(report.since, hour - 23 * HOUR);
      assert.equal(report.buckets.length, 24);
      const last = report.buckets[23];
      assert.deepEqual(last, {
        at: hour,
        sent: 2,
        received: 0,
        attempts: 4,
        failed: 1,
        p50Ms: 20,
        p99Ms: 400,
      });
      assert.deepEqual(report.buckets[21], {
        at: hour - 2 * HOUR,
        sent: 1,
        received: 3,
        attempts: 0,
        failed: 0,
        p50Ms: null,
        p99Ms: null,
      });
      assert.deepEqual(report.totals, { sent: 3, received: 3, attempts: 4, failed: 1, failureRate: 0.25 });
      assert.deepEqual(report.latency, { p50Ms: 20, p99Ms: 400 });
      assert.deepEqual(report.sessions, [
        { instanceId: t.instance.id, changes: [{ at: hour - HOUR, status: 'connected' }] },
      ]);
    });

    it('covers the organization, takes 1h and 7d, and refuses another range naming the field', async () => {
      const org = await viewer.call('GET', '/health?range=7d');
      assert.equal(org.status, 200, JSON.stringify(org.body));
      assert.equal(org.body.data.buckets.length, 28);
      assert.deepEqual(org.body.data.totals, {
        sent: 3,
        received: 4,
        attempts: 4,
        failed: 1,
        failureRate: 0.25,
      });
      const hourly = await viewer.call('GET', `/instances/${t.instance.id}/health?range=1h`);
      assert.equal(hourly.body.data.buckets.length, 12);
      const bad = await viewer.call('GET', '/health?range=1y');
      assert.deepEqual(bad.body, error(400, 'range must be one of 1h, 24h, 7d'));
      const other = await viewer.call('GET', '/instances/00000000-0000-4000-8000-000000000000/health');
      assert.deepEqual(other.body, error(404, 'instance not found'));
    });
  });
}
