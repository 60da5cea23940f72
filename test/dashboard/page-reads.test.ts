import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type MeProps, pageHarness } from '../support/dashboard-dom.ts';

/**
 * The organization's pages (instances, API keys, users, usage) read their list when opened and again after each
 * change made there (or on Refresh), so a slow first read may still be on its way when a later one answers; whatever
 * order they answer in, the page shows the read started last (web/src/ui.tsx `useLatestRead`, docs/dashboard.md
 * "Live updates"): an instance just created, a key just created or a user just added never disappears, and usage
 * never goes back to older counts. The pages run in Node on a minimal DOM (test/support/dashboard-dom.ts); the server
 * is a `fetch` the test answers.
 */

const owner: MeProps = {
  user: { id: 'u1', email: 'owner@parley.test', role: 'owner' },
  org: { id: 'o1', name: 'default', plan: 'free' },
  csrfToken: 'csrf',
  expiresAt: '2026-01-16T00:00:00.000Z',
};

/** An instance summary as the dashboard API lists it. */
const instance = (id: string, name: string) => ({
  id,
  name,
  env: 'test',
  phone: null,
  connected: false,
  loggedIn: false,
  reason: null,
  lastConnectedAt: null,
  webhook: null,
  subscribe: [],
  hasHmacKey: false,
});

/** An API key as the dashboard API lists it (never its value). */
const key = (id: string, prefix: string) => ({
  id,
  name: `key ${id}`,
  prefix,
  env: 'test',
  scopes: ['chat:*'],
  instances: [],
  expiresAt: null,
  revokedAt: null,
  lastUsedAt: null,
});

/** A user of the organization. */
const user = (id: string, email: string) => ({ id, email, role: 'member', lastSignInAt: null });

/** The usage report with `used` requests in the test environment's minute window. */
const usage = (used: number) => ({
  plan: 'free',
  perMinute: 60,
  perDay: 1000,
  maxInstances: 2,
  usage: [
    {
      env: 'test',
      windows: [{ name: 'minute', quota: 60, remaining: 60 - used, reset: 30 }],
      instances: 1,
    },
  ],
});

describe('organization pages read while another read is on its way show the latest one', () => {
  const page = pageHarness();
  const { act, show } = page;
  /** The GET requests to exactly `/dashboard/api<path>`, in order. */
  const reads = (path: string) =>
    page.requests.filter((r) => r.method === 'GET' && r.url === `/dashboard/api${path}`);
  /** The one POST request the page made. */
  const posted = () => {
    const [post, ...more] = page.requests.filter((r) => r.method === 'POST');
    assert.ok(post && more.length === 0, `${page.requests.filter((r) => r.method === 'POST').length} POSTs`);
    return post;
  };
  /** The element with the attribute `id` = `id`. */
  const byId = (id: string) => page.root.one(`#${id}`, (e) => e.getAttribute('id') === id);
  /** The first cells of the table's body rows. */
  const firstCells = () =>
    page.root
      .all((e) => e.localName === 'tbody')
      .flatMap((body) => body.all((e) => e.localName === 'tr'))
      .map((row) => row.all((e) => e.localName === 'td')[0]?.textContent);

  it('instances: the first read answering after the one that followed a creation keeps the new instance', async () => {
    await show(page.pages.h(page.pages.InstancesPage, { me: owner }));
    const [first] = reads('/instances');
    await act(() => byId('instance-name').dispatch('input', { value: 'two' }));
    await act(() => page.root.one('the create form', (e) => e.localName === 'form').dispatch('submit'));
    await act(() => posted().answer(instance('i2', 'two')));
    const [, again] = reads('/instances');
    assert.ok(again, 'the list is read again after the creation');
    await act(() => again.answer({ instances: [instance('i1', 'one'), instance('i2', 'two')] }));
    await act(() => first?.answer({ instances: [instance('i1', 'one')] }));
    assert.deepEqual(firstCells(), ['one', 'two']);
  });

  it('API keys: the first read answering after the one that followed a creation keeps the new key', async () => {
    await show(page.pages.h(page.pages.KeysPage, { me: owner }));
    const [firstKeys] = reads('/keys');
    const [firstInstances] = reads('/instances');
    const everything = page.root.one(
      'the chat:* box',
      (e) => e.getAttribute('type') === 'checkbox' && (e.parentNode?.textContent ?? '') === 'chat:*',
    );
    await act(() => everything.dispatch('change', { checked: true }));
    await act(() => page.root.one('the key form', (e) => e.localName === 'form').dispatch('submit'));
    const create = page.root.one(
      'Create key',
      (e) => e.localName === 'button' && e.textContent === 'Create key',
    );
    await act(() => create.dispatch('click'));
    await act(() => posted().answer({ key: 'svc_test_newkeyvalue' }));
    const [, keysAgain] = reads('/keys');
    const [, instancesAgain] = reads('/instances');
    assert.ok(keysAgain && instancesAgain, 'the keys are read again after the creation');
    await act(() => keysAgain.answer({ keys: [key('k1', 'svc_test_newk')] }));
    await act(() => instancesAgain.answer({ instances: [] }));
    await act(() => firstKeys?.answer({ keys: [] }));
    await act(() => firstInstances?.answer({ instances: [] }));
    assert.deepEqual(firstCells(), ['key k1']);
  });

  it('users: the first read answering after the one that followed an addition keeps the new user', async () => {
    await show(page.pages.h(page.pages.UsersPage, { me: owner }));
    const [first] = reads('/users');
    await act(() => byId('user-email').dispatch('input', { value: 'ana@parley.test' }));
    await act(() => page.root.one('the user form', (e) => e.localName === 'form').dispatch('submit'));
    await act(() => posted().answer({ user: user('u2', 'ana@parley.test'), password: 'a generated one' }));
    const [, again] = reads('/users');
    assert.ok(again, 'the users are read again after the addition');
    await act(() =>
      again.answer({ users: [user('u1', 'owner@parley.test'), user('u2', 'ana@parley.test')] }),
    );
    await act(() => first?.answer({ users: [user('u1', 'owner@parley.test')] }));
    assert.deepEqual(firstCells(), ['owner@parley.test', 'ana@parley.test']);
  });

  it('usage: an older refresh answering after a newer one does not bring back older counts', async () => {
    await show(page.pages.h(page.pages.UsagePage, {}));
    await act(() => reads('/usage')[0]?.answer(usage(1)));
    const refresh = page.root.one('Refresh', (e) => e.localName === 'button' && e.textContent === 'Refresh');
    await act(() => refresh.dispatch('click'));
    await act(() => refresh.dispatch('click'));
    await act(() => refresh.dispatch('click'));
    const [, oldest, older, newer] = reads('/usage');
    assert.ok(oldest && older && newer);
    await act(() => newer.answer(usage(5)));
    await act(() => older.answer(usage(3)));
    await act(() => oldest.fail(503, 'the store is unavailable right now; retry shortly'));
    assert.match(page.root.textContent, /This minute: 5 of 60 used/);
    assert.deepEqual(page.alerts(), [], 'no error of the older refresh');
  });
});
