import assert from 'node:assert/strict';
import { afterEach, before, beforeEach, describe, it } from 'node:test';
import {
  type DashboardPages,
  dashboardPages,
  type FakeElement,
  type HeldRequest,
  holdRequests,
  installDocument,
  settle,
} from '../support/dashboard-dom.ts';

/**
 * The dashboard's lists are read again on every pushed change (docs/dashboard.md "Live updates") and whenever the
 * reader picks a filter or a page, so reads overlap; whatever order they answer in, a list shows the read started
 * last (web/src/ui.tsx `useLatestRead`): its rows match the filters shown, and "Redeliver selected" acts on them. The
 * health panel (read again on its period and on pushes) and the webhook endpoints (read again on pushes, after each
 * action and for another instance) show their latest read the same way.
 * The pages run in Node on a minimal DOM (test/support/dashboard-dom.ts); the server is a `fetch` the test answers.
 */

/** One delivery of a delivery log, as the dashboard API answers it. */
const delivery = (sequence: number, status: string) => ({
  id: `00000000-0000-4000-8000-${String(sequence).padStart(12, '0')}`,
  type: 'Message',
  sequence,
  status,
  reason: null,
  createdAt: '2026-01-15T12:00:00.000Z',
  attempts: [],
});

/** A health report (src/app/health.ts) whose totals count `sent` messages, and nothing else. */
const report = (range: string, sent: number) => ({
  range,
  since: 0,
  until: 3_600_000,
  bucketMs: 60_000,
  buckets: [],
  totals: { sent, received: 0, attempts: 0, failed: 0, failureRate: null },
  latency: { p50Ms: null, p99Ms: null },
  sessions: [],
});

/** A webhook endpoint as the dashboard API answers it, enabled or disabled by a 410. */
const endpoint = (id: string, url: string, enabled: boolean) => ({
  id,
  url,
  events: ['Message'],
  description: null,
  enabled,
  disabledAt: enabled ? null : '2026-01-15T12:00:00.000Z',
  disabledReason: enabled ? null : 'the receiver answered 410 Gone',
  createdAt: '2026-01-15T12:00:00.000Z',
  updatedAt: '2026-01-15T12:00:00.000Z',
});

/** One entry of the event log. */
const entry = (sequence: number, type: string) => ({
  type,
  event: {},
  instanceId: 'x',
  sequence,
  createdAt: '2026-01-15T12:00:00.000Z',
});

describe('dashboard lists read while another read is on its way show the latest one', () => {
  let pages: DashboardPages;
  let requests: HeldRequest[];
  let root: FakeElement;
  let cleanUp: () => void = () => undefined;

  before(async () => {
    pages = await dashboardPages();
  });
  beforeEach(() => {
    const dom = installDocument();
    const held = holdRequests();
    requests = held.requests;
    root = dom.document.createElement('div');
    cleanUp = () => {
      pages.render(null, root);
      held.restore();
      dom.restore();
    };
  });
  afterEach(() => cleanUp());

  /** Runs `step` (an action, answers), lets the page apply what follows, and renders. */
  const act = (step: () => void) =>
    pages.act(async () => {
      step();
      await settle();
    });
  /** The request number `index` the page made. */
  const request = (index: number): HeldRequest => {
    const held = requests[index];
    assert.ok(held, `request ${index} was made (${requests.length} were)`);
    return held;
  };
  /** The outcome words of the delivery rows shown. */
  const outcomes = () =>
    root
      .all((e) => e.localName === 'tr' && e.attributes.has('data-delivery'))
      .map((row) => /Delivered|Failed/.exec(row.textContent)?.[0]);

  const deliveryLog = (version: number) =>
    pages.h(pages.DeliveryLog, {
      path: '/instances/x/deliveries',
      caption: 'Delivery log',
      attribute: 'delivery',
      types: ['Message'],
      canManage: true,
      version,
    });

  it('delivery log: an older unfiltered read answering after the filtered one does not replace its rows', async () => {
    await act(() => pages.render(deliveryLog(0), root));
    assert.equal(requests.length, 1, 'the first read (any status) is on its way');
    const [status] = root.all((e) => e.localName === 'select');
    assert.ok(status);
    await act(() => status.dispatch('change', { value: 'failed' }));
    assert.equal(request(1).query.get('status'), 'failed');

    await act(() => request(1).answer({ deliveries: [delivery(3, 'failed')], nextCursor: null }));
    await act(() =>
      request(0).answer({
        deliveries: [delivery(5, 'delivered'), delivery(4, 'delivered'), delivery(3, 'failed')],
        nextCursor: null,
      }),
    );
    assert.equal(status.value, 'failed');
    assert.deepEqual(outcomes(), ['Failed'], 'the rows match the filter shown');

    // "Redeliver selected" with the whole page ticked queues the failed delivery only.
    const everything = root.one(
      'the tick of the page',
      (e) => e.getAttribute('aria-label') === 'Select every event on this page',
    );
    await act(() => everything.dispatch('change', { checked: true }));
    const redeliver = root.one(
      'Redeliver selected',
      (e) => e.localName === 'button' && e.textContent.startsWith('Redeliver selected'),
    );
    assert.match(redeliver.textContent, /\(1\)/);
    await act(() => redeliver.dispatch('click'));
    assert.equal(request(2).method, 'POST');
    assert.equal(
      request(2).url,
      `/dashboard/api/instances/x/deliveries/${delivery(3, 'failed').id}/redeliver`,
    );
    await act(() => request(2).answer({ details: 'Delivery queued' }));
    assert.equal(requests.length, 4, 'no other event was queued; the log is read again');
    assert.equal(request(3).query.get('status'), 'failed');
  });

  it('delivery log: an older read that fails after a newer one answered shows no error', async () => {
    await act(() => pages.render(deliveryLog(0), root));
    await act(() => pages.render(deliveryLog(1), root));
    assert.equal(requests.length, 2, 'a pushed change read the log again');
    await act(() => request(1).answer({ deliveries: [delivery(5, 'delivered')], nextCursor: null }));
    await act(() => request(0).fail(503, 'the store is unavailable right now; retry shortly'));
    assert.deepEqual(outcomes(), ['Delivered']);
    assert.equal(
      root.all((e) => e.getAttribute('role') === 'alert').length,
      0,
      `no error shown: ${root.textContent}`,
    );
  });

  it('delivery log: a redelivery reads the log again with the filter shown when it ends, not at the click', async () => {
    await act(() => pages.render(deliveryLog(0), root));
    await act(() =>
      request(0).answer({ deliveries: [delivery(5, 'delivered'), delivery(3, 'failed')], nextCursor: null }),
    );
    const again = root.one('Redeliver event 5', (e) => e.getAttribute('aria-label') === 'Redeliver event 5');
    await act(() => again.dispatch('click'));
    assert.equal(request(1).method, 'POST');
    const [status] = root.all((e) => e.localName === 'select');
    assert.ok(status);
    await act(() => status.dispatch('change', { value: 'failed' }));
    assert.equal(request(2).query.get('status'), 'failed');
    await act(() => request(2).answer({ deliveries: [delivery(3, 'failed')], nextCursor: null }));
    await act(() => request(1).answer({ details: 'Delivery queued' }));
    assert.equal(
      request(3).query.get('status'),
      'failed',
      'the read after the redelivery keeps the filter shown',
    );
    await act(() => request(3).answer({ deliveries: [delivery(3, 'failed')], nextCursor: null }));
    assert.deepEqual(outcomes(), ['Failed']);
  });

  it('event log: a reload pushed before the filter was applied, answering last, does not replace the filtered page', async () => {
    await act(() => pages.render(pages.h(pages.EventLogPanel, { id: 'x', version: 0 }), root));
    const config = requests.findIndex((r) => r.url.endsWith('/webhook'));
    await act(() => request(config).answer({ eventTypes: ['Message', 'SessionStatus'] }));
    const reads = () => requests.filter((r) => r.url.includes('/event-log'));
    await act(() =>
      reads()[0]?.answer({ events: [entry(1, 'SessionStatus'), entry(2, 'Message')], next: 2 }),
    );
    // An event is recorded: the live stream bumps `version` and the page is read again, with no filter yet.
    await act(() => pages.render(pages.h(pages.EventLogPanel, { id: 'x', version: 1 }), root));
    // Meanwhile the reader ticks Message and presses Show.
    const message = root.one(
      'the Message box',
      (e) => e.getAttribute('type') === 'checkbox' && (e.parentNode?.textContent ?? '') === 'Message',
    );
    await act(() => message.dispatch('change', { checked: true }));
    await act(() => root.one('the filters', (e) => e.localName === 'form').dispatch('submit'));
    const [, unfiltered, filtered] = reads();
    assert.ok(unfiltered && filtered, `${reads().length} reads`);
    assert.equal(unfiltered.query.get('types'), null);
    assert.equal(filtered.query.get('types'), 'Message');

    await act(() => filtered.answer({ events: [entry(2, 'Message'), entry(4, 'Message')], next: 4 }));
    await act(() =>
      unfiltered.answer({
        events: [
          entry(1, 'SessionStatus'),
          entry(2, 'Message'),
          entry(3, 'SessionStatus'),
          entry(4, 'Message'),
        ],
        next: 4,
      }),
    );
    const shown = root
      .all((e) => e.localName === 'tr' && e.attributes.has('data-event'))
      .map((row) => row.getAttribute('data-event'));
    assert.deepEqual(shown, ['2', '4'], 'the Message entries only');
  });

  it('conversations: an older chat list answering last does not replace the newer one', async () => {
    const chat = (jid: string) => ({
      jid,
      isGroup: false,
      name: jid,
      lastMessage: {
        id: '1',
        fromMe: false,
        kind: 'text',
        text: 'hi',
        timestamp: '2026-01-15T12:00:00.000Z',
        state: '',
      },
      unreadCount: 0,
    });
    const panel = (version: number) =>
      pages.h(pages.ConversationsPanel, { id: 'x', canManage: false, version });
    await act(() => pages.render(panel(0), root));
    await act(() => pages.render(panel(1), root));
    assert.equal(requests.length, 2);
    await act(() => request(1).answer({ chats: [chat('ana'), chat('bia')] }));
    await act(() => request(0).answer({ chats: [chat('ana')] }));
    const names = root.all((e) => e.getAttribute('class') === 'chat-name').map((e) => e.textContent);
    assert.deepEqual(names, ['ana', 'bia']);
  });

  /** The "Messages sent" total the health panel shows. */
  const sentTotal = () => {
    const totals = root.one('the health totals', (e) => e.attributes.has('data-health-totals'));
    const names = totals.all((e) => e.localName === 'dt').map((e) => e.textContent);
    const values = totals.all((e) => e.localName === 'dd').map((e) => e.textContent);
    return values[names.indexOf('Messages sent')];
  };
  /** The alerts shown. */
  const alerts = () => root.all((e) => e.getAttribute('role') === 'alert').map((e) => e.textContent);

  it('health: an older read of another period answering last does not replace the period shown', async () => {
    await act(() => pages.render(pages.h(pages.HealthPanel, { instanceId: 'x', version: 0 }), root));
    assert.equal(request(0).query.get('range'), '24h');
    const [period] = root.all((e) => e.localName === 'select');
    assert.ok(period);
    await act(() => period.dispatch('change', { value: '1h' }));
    assert.equal(request(1).query.get('range'), '1h');

    await act(() => request(1).answer(report('1h', 3)));
    await act(() => request(0).answer(report('24h', 240)));
    assert.equal(period.value, '1h');
    assert.equal(sentTotal(), '3', 'the totals of the period shown');
  });

  it('health: an older read that fails after a newer one answered shows no error', async () => {
    await act(() => pages.render(pages.h(pages.HealthPanel, { version: 0 }), root));
    await act(() => pages.render(pages.h(pages.HealthPanel, { version: 1 }), root));
    assert.equal(requests.length, 2, 'a pushed change read the health again');
    await act(() => request(1).answer(report('24h', 7)));
    await act(() => request(0).fail(503, 'the store is unavailable right now; retry shortly'));
    assert.equal(sentTotal(), '7');
    assert.deepEqual(alerts(), [], 'no error shown');
  });

  /** The URLs of the endpoint rows shown, with their state. */
  const endpointRows = () =>
    root
      .all((e) => e.localName === 'tr' && e.attributes.has('data-endpoint'))
      .map((row) => `${row.getAttribute('data-endpoint')} ${/Enabled|Disabled/.exec(row.textContent)?.[0]}`);
  const endpointsPanel = (id: string, version: number) =>
    pages.h(pages.EndpointsPanel, { id, canManage: false, version });

  it('endpoints: the previous instance’s read answering last does not replace this instance’s endpoints', async () => {
    await act(() => pages.render(endpointsPanel('x', 0), root));
    await act(() => pages.render(endpointsPanel('y', 0), root));
    assert.deepEqual(
      requests.map((r) => r.url),
      ['/dashboard/api/instances/x/endpoints', '/dashboard/api/instances/y/endpoints'],
    );
    await act(() =>
      request(1).answer({
        endpoints: [endpoint('y1', 'https://y.test/hook', true)],
        eventTypes: ['Message'],
      }),
    );
    await act(() =>
      request(0).answer({
        endpoints: [endpoint('x1', 'https://x.test/hook', true)],
        eventTypes: ['Message'],
      }),
    );
    assert.deepEqual(endpointRows(), ['y1 Enabled']);
  });

  it('endpoints: an older read answering after the one a push started does not bring back an enabled endpoint', async () => {
    await act(() => pages.render(endpointsPanel('x', 0), root));
    // A 410 Gone disabled the endpoint: the push reads the list again while the first read is on its way.
    await act(() => pages.render(endpointsPanel('x', 1), root));
    assert.equal(requests.length, 2);
    await act(() =>
      request(1).answer({
        endpoints: [endpoint('x1', 'https://x.test/hook', false)],
        eventTypes: ['Message'],
      }),
    );
    await act(() =>
      request(0).answer({
        endpoints: [endpoint('x1', 'https://x.test/hook', true)],
        eventTypes: ['Message'],
      }),
    );
    assert.deepEqual(endpointRows(), ['x1 Disabled']);
    await act(() => pages.render(endpointsPanel('x', 2), root));
    await act(() => request(2).fail(503, 'the store is unavailable right now; retry shortly'));
    assert.deepEqual(
      alerts(),
      ['the store is unavailable right now; retry shortly'],
      'the latest read’s error',
    );
  });
});
