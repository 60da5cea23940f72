import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type FakeElement, pageHarness } from '../support/dashboard-dom.ts';

/**
 * The panels of an instance's page, given another instance (the page's `id` changes), show nothing of the previous
 * one: a read of the previous instance answering (or failing) after the switch is not shown, what was shown for it
 * (a profile, a webhook URL, an open chat, an endpoint's secret, a later page of a log) goes, and the new instance is
 * read from its first page (docs/dashboard.md "Live updates"). The panels run in Node on a minimal DOM
 * (test/support/dashboard-dom.ts); the server is a `fetch` the test answers.
 */

/** One entry of the event log. */
const entry = (sequence: number) => ({
  type: 'Message',
  event: {},
  instanceId: 'x',
  sequence,
  createdAt: '2026-01-15T12:00:00.000Z',
});

/** The account's profile as the dashboard API answers it. */
const profile = (name: string) => ({ name, about: `${name}'s about`, pictureUrl: null });

/** An instance's webhook settings as the dashboard API answers them. */
const webhook = (url: string, disabledReason: string | null = null) => ({
  webhook: url,
  subscribe: ['Message'],
  eventTypes: ['Message', 'SessionStatus'],
  disabled: disabledReason !== null,
  disabledReason,
  hasHmacKey: false,
});

/** One delivery of a delivery log. */
const delivery = (sequence: number) => ({
  id: `00000000-0000-4000-8000-${String(sequence).padStart(12, '0')}`,
  type: 'Message',
  sequence,
  status: 'delivered',
  reason: null,
  createdAt: '2026-01-15T12:00:00.000Z',
  attempts: [],
});

/** One chat of the chat list. */
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

/** One received text message of a chat. */
const message = (id: string, text: string) => ({
  id,
  fromMe: false,
  pushName: '',
  sender: 'ana',
  timestamp: '2026-01-15T12:00:00.000Z',
  kind: 'text',
  message: { conversation: text },
});

describe('an instance’s panels, given another instance, show nothing of the previous one', () => {
  const page = pageHarness();
  const { act, alerts, made, show } = page;
  /** The element with the attribute `id` = `id`, if shown. */
  const byId = (id: string): FakeElement | undefined => page.root.all((e) => e.getAttribute('id') === id)[0];
  /** The texts of the `<dd>` facts shown. */
  const facts = () => page.root.all((e) => e.localName === 'dd').map((e) => e.textContent);

  const eventLog = (id: string) => page.pages.h(page.pages.EventLogPanel, { id, version: 0 });
  /** The sequences of the event log rows shown. */
  const events = () =>
    page.root
      .all((e) => e.localName === 'tr' && e.attributes.has('data-event'))
      .map((row) => row.getAttribute('data-event'));

  it('event log: the previous instance’s webhook settings failing after the switch show no error', async () => {
    await show(eventLog('x'));
    await show(eventLog('y'));
    await act(() => made('/instances/y/webhook')[0]?.answer(webhook('')));
    await act(() => made('/instances/y/event-log')[0]?.answer({ events: [entry(1)], next: 1 }));
    await act(() => made('/instances/x/webhook')[0]?.fail(404, 'instance not found'));
    await act(() => made('/instances/x/event-log')[0]?.fail(404, 'instance not found'));
    assert.deepEqual(events(), ['1']);
    assert.deepEqual(alerts(), [], 'no error shown');
  });

  it('event log: picked while a later page is shown, the new instance is read from its first page', async () => {
    await show(eventLog('x'));
    await act(() => made('/instances/x/webhook')[0]?.answer(webhook('')));
    const first = Array.from({ length: 25 }, (_, index) => entry(index + 1));
    await act(() => made('/instances/x/event-log')[0]?.answer({ events: first, next: 25 }));
    const next = page.root.one('Next page', (e) => e.localName === 'button' && e.textContent === 'Next page');
    await act(() => next.dispatch('click'));
    const later = made('/instances/x/event-log')[1];
    assert.equal(later?.query.get('after'), '25');
    await act(() => later?.answer({ events: [entry(26), entry(27)], next: 27 }));
    assert.deepEqual(events(), ['26', '27']);

    await show(eventLog('y'));
    const reads = made('/instances/y/event-log');
    assert.equal(reads.length, 1, 'the new instance is read');
    assert.equal(reads[0]?.query.get('after'), '0');
    assert.deepEqual(events(), [], 'the previous instance’s entries are gone');
    await act(() => reads[0]?.answer({ events: [entry(1), entry(2)], next: 2 }));
    assert.deepEqual(events(), ['1', '2']);
  });

  const profilePanel = (id: string) => page.pages.h(page.pages.ProfilePanel, { id, canManage: true });

  it('profile: the previous instance’s profile is not shown once another instance is picked', async () => {
    await show(profilePanel('x'));
    await act(() => made('/instances/x/profile')[0]?.answer(profile('Xavier')));
    assert.equal(byId('profile-name')?.value, 'Xavier');
    await show(profilePanel('y'));
    assert.deepEqual(facts(), [], `nothing shown while the new profile is read: ${page.root.textContent}`);
    assert.equal(byId('profile-name'), undefined, 'no form to save the previous profile into this instance');
    await act(() => made('/instances/y/profile')[0]?.answer(profile('Yara')));
    assert.deepEqual(facts().slice(0, 2), ['Yara', "Yara's about"]);
  });

  it('profile: the previous instance’s read answering after this one’s does not replace it', async () => {
    await show(profilePanel('x'));
    await show(profilePanel('y'));
    await act(() => made('/instances/y/profile')[0]?.answer(profile('Yara')));
    await act(() => made('/instances/x/profile')[0]?.answer(profile('Xavier')));
    assert.deepEqual(facts().slice(0, 2), ['Yara', "Yara's about"]);
    assert.equal(byId('profile-name')?.value, 'Yara');
  });

  it('profile: the previous instance’s failed read shows no error on this one', async () => {
    await show(profilePanel('x'));
    await show(profilePanel('y'));
    await act(() => made('/instances/y/profile')[0]?.answer(profile('Yara')));
    await act(() => made('/instances/x/profile')[0]?.fail(409, 'the instance is not connected'));
    assert.deepEqual(alerts(), []);
    assert.equal(facts()[0], 'Yara');
  });

  const blocklist = (id: string) => page.pages.h(page.pages.BlocklistPanel, { id, canManage: true });
  /** The numbers the block list shows. */
  const blocked = () => page.root.all((e) => e.localName === 'code').map((e) => e.textContent);

  it('blocked users: the previous instance’s list answering after this one’s does not replace it', async () => {
    await show(blocklist('x'));
    await show(blocklist('y'));
    await act(() => made('/instances/y/blocklist')[0]?.answer({ phones: ['5511900000002'] }));
    await act(() => made('/instances/x/blocklist')[0]?.answer({ phones: ['5511900000001'] }));
    assert.deepEqual(blocked(), ['5511900000002']);
  });

  it('blocked users: the first read answering after a block does not take the blocked number off', async () => {
    await show(blocklist('x'));
    const phone = byId('block-phone');
    assert.ok(phone);
    await act(() => phone.dispatch('input', { value: '5511900000001' }));
    await act(() => page.root.one('the block form', (e) => e.localName === 'form').dispatch('submit'));
    const block = page.requests.find((r) => r.method === 'POST');
    assert.equal(block?.url, '/dashboard/api/instances/x/block');
    await act(() => block?.answer({ phones: ['5511900000001'] }));
    await act(() => made('/instances/x/blocklist')[0]?.answer({ phones: [] }));
    assert.deepEqual(blocked(), ['5511900000001']);
  });

  const webhookPanel = (id: string) =>
    page.pages.h(page.pages.WebhookPanel, { id, canManage: true, version: 0 });

  it('webhook: the previous instance’s settings answering after this one’s do not replace them', async () => {
    await show(webhookPanel('x'));
    await show(webhookPanel('y'));
    await act(() => made('/instances/y/webhook')[0]?.answer(webhook('https://y.test/hook')));
    await act(() =>
      made('/instances/x/webhook')[0]?.answer(webhook('https://x.test/hook', 'the receiver answered 410')),
    );
    assert.equal(byId('webhook-url')?.value, 'https://y.test/hook');
    assert.deepEqual(alerts(), [], 'not the previous webhook’s state');
  });

  it('webhook: the previous instance’s URL is not in the form while this one’s is read, nor its error after', async () => {
    await show(webhookPanel('x'));
    await act(() => made('/instances/x/webhook')[0]?.answer(webhook('https://x.test/hook')));
    assert.equal(byId('webhook-url')?.value, 'https://x.test/hook');
    await show(webhookPanel('z'));
    await show(webhookPanel('y'));
    assert.equal(byId('webhook-url')?.value, '', 'Save URL would not save the previous instance’s URL here');
    await act(() => made('/instances/y/webhook')[0]?.answer(webhook('https://y.test/hook')));
    await act(() => made('/instances/z/webhook')[0]?.fail(404, 'instance not found'));
    assert.equal(byId('webhook-url')?.value, 'https://y.test/hook');
    assert.deepEqual(alerts(), []);
  });

  const deliveryLog = (id: string) =>
    page.pages.h(page.pages.DeliveryLog, {
      path: `/instances/${id}/deliveries`,
      caption: 'Delivery log',
      attribute: 'delivery',
      types: ['Message'],
      canManage: true,
      version: 0,
    });

  it('delivery log: another log is read from its first page, not with the cursor of the page shown', async () => {
    await show(deliveryLog('x'));
    await act(() =>
      made('/instances/x/deliveries')[0]?.answer({ deliveries: [delivery(5)], nextCursor: 'x-cursor' }),
    );
    const older = page.root.one('Older', (e) => e.localName === 'button' && e.textContent === 'Older');
    await act(() => older.dispatch('click'));
    const second = made('/instances/x/deliveries')[1];
    assert.equal(second?.query.get('cursor'), 'x-cursor');
    await act(() => second?.answer({ deliveries: [delivery(4)], nextCursor: null }));
    const tick = page.root.one(
      'the tick of event 4',
      (e) => e.getAttribute('aria-label') === 'Select event 4',
    );
    await act(() => tick.dispatch('change', { checked: true }));

    await show(deliveryLog('y'));
    const reads = made('/instances/y/deliveries');
    assert.equal(reads.length, 1);
    assert.equal(reads[0]?.query.get('cursor'), null, 'the first page');
    await act(() => reads[0]?.answer({ deliveries: [delivery(1)], nextCursor: null }));
    assert.match(page.root.textContent, /Page 1/);
    const redeliver = page.root.one(
      'Redeliver selected',
      (e) => e.localName === 'button' && e.textContent.startsWith('Redeliver selected'),
    );
    assert.match(redeliver.textContent, /\(0\)/, 'nothing of the previous log selected');
  });

  const conversations = (id: string) =>
    page.pages.h(page.pages.ConversationsPanel, { id, canManage: false, version: 0 });
  /** The ids of the messages shown. */
  const messages = () =>
    page.root.all((e) => e.attributes.has('data-message')).map((e) => e.getAttribute('data-message'));
  /** Opens the chat `jid` of the list. */
  const open = (jid: string) =>
    act(() =>
      page.root
        .one(
          `the chat ${jid}`,
          (e) => e.localName === 'button' && e.all((c) => c.textContent === jid).length > 0,
        )
        .dispatch('click'),
    );

  it('conversations: the previous instance’s open chat and its messages go', async () => {
    await show(conversations('x'));
    await act(() => made('/instances/x/chats')[0]?.answer({ chats: [chat('ana')] }));
    await open('ana');
    await act(() =>
      made('/instances/x/chats/ana/messages')[0]?.answer({
        messages: [message('m1', 'hello')],
        nextCursor: null,
      }),
    );
    assert.deepEqual(messages(), ['m1']);

    await show(conversations('y'));
    assert.deepEqual(messages(), [], 'no message of the previous instance');
    assert.equal(page.root.all((e) => e.localName === 'h3').length, 0, 'no chat open');
    assert.deepEqual(made('/instances/y/chats/'), [], 'the previous instance’s chat is not read here');
    await act(() => made('/instances/y/chats')[0]?.answer({ chats: [chat('bia')] }));
    assert.deepEqual(
      page.root.all((e) => e.getAttribute('class') === 'chat-name').map((e) => e.textContent),
      ['bia'],
    );
  });

  it('conversations: another chat opened shows none of the previous chat’s messages', async () => {
    await show(conversations('x'));
    await act(() => made('/instances/x/chats')[0]?.answer({ chats: [chat('ana'), chat('bia')] }));
    await open('ana');
    await act(() =>
      made('/instances/x/chats/ana/messages')[0]?.answer({
        messages: [message('m1', 'hello')],
        nextCursor: null,
      }),
    );
    await open('bia');
    assert.deepEqual(messages(), [], 'nothing of ana’s chat under bia’s name');
    await act(() =>
      made('/instances/x/chats/bia/messages')[0]?.answer({
        messages: [message('m2', 'oi')],
        nextCursor: null,
      }),
    );
    assert.deepEqual(messages(), ['m2']);
  });

  it('health: the previous instance’s charts are not shown while this one’s are read', async () => {
    const report = (sent: number) => ({
      range: '24h',
      since: 0,
      until: 86_400_000,
      bucketMs: 3_600_000,
      buckets: [],
      totals: { sent, received: 0, attempts: 0, failed: 0, failureRate: null },
      latency: { p50Ms: null, p99Ms: null },
      sessions: [],
    });
    /** The totals shown, as `name value` lines. */
    const totals = () =>
      page.root.all((e) => e.attributes.has('data-health-totals')).map((e) => e.textContent);
    await show(page.pages.h(page.pages.HealthPanel, { instanceId: 'x', version: 0 }));
    await act(() => made('/instances/x/health')[0]?.answer(report(240)));
    assert.equal(totals().length, 1);
    await show(page.pages.h(page.pages.HealthPanel, { instanceId: 'y', version: 0 }));
    assert.deepEqual(totals(), [], 'none of the previous instance’s totals');
    await act(() => made('/instances/y/health')[0]?.answer(report(3)));
    assert.match(totals()[0] ?? '', /^Messages sent3/);
  });

  const endpoints = (id: string) =>
    page.pages.h(page.pages.EndpointsPanel, { id, canManage: true, version: 0 });

  it('endpoints: the previous instance’s endpoints and the secret just shown go', async () => {
    await show(endpoints('x'));
    await act(() => made('/instances/x/endpoints')[0]?.answer({ endpoints: [], eventTypes: ['Message'] }));
    const url = byId('endpoint-url');
    assert.ok(url);
    await act(() => url.dispatch('input', { value: 'https://x.test/hook' }));
    const add = page.root.one('the add form', (e) => e.localName === 'form');
    await act(() => add.dispatch('submit'));
    const created = {
      id: 'x1',
      url: 'https://x.test/hook',
      events: ['Message'],
      description: null,
      enabled: true,
      disabledAt: null,
      disabledReason: null,
      createdAt: '2026-01-15T12:00:00.000Z',
      updatedAt: '2026-01-15T12:00:00.000Z',
    };
    await act(() => made('/instances/x/endpoints')[1]?.answer({ ...created, secret: 'whsec_x' }));
    await act(() =>
      made('/instances/x/endpoints')[2]?.answer({ endpoints: [created], eventTypes: ['Message'] }),
    );
    assert.equal(byId('endpoint-secret')?.value, 'whsec_x');

    await show(endpoints('y'));
    assert.equal(byId('endpoint-secret'), undefined, 'the previous instance’s secret is not shown');
    assert.deepEqual(
      page.root.all((e) => e.attributes.has('data-endpoint')).map((e) => e.getAttribute('data-endpoint')),
      [],
      'nor its endpoints, whose buttons would act on this instance',
    );
  });
});
