import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type MeProps, pageHarness } from '../support/dashboard-dom.ts';

/**
 * An instance's page reads the instance once (`GET /instances/{id}`) and is then kept current by the status its live
 * stream pushes (docs/dashboard.md "Live updates"). A pushed status is newer than any read started before it arrived,
 * so such a read answering later does not replace it; and after another instance is picked, nothing of the previous
 * one (its read, its name, its QR code) is shown. The page runs in Node on a minimal DOM
 * (test/support/dashboard-dom.ts); the server is a `fetch` and an `EventSource` the test answers.
 */

const me: MeProps = {
  user: { id: 'u1', email: 'viewer@parley.test', role: 'viewer' },
  org: { id: 'o1', name: 'default', plan: 'free' },
  csrfToken: 'csrf',
  expiresAt: '2026-01-16T00:00:00.000Z',
};

/** An instance summary as the dashboard API answers it, linked and connected or neither. */
const summary = (id: string, name: string, loggedIn: boolean) => ({
  id,
  name,
  env: 'test',
  phone: loggedIn ? '5511999990000' : null,
  connected: loggedIn,
  loggedIn,
  reason: null,
  lastConnectedAt: null,
  webhook: null,
  subscribe: [],
  hasHmacKey: false,
});

/** A QR code as the stream pushes it. */
const qr = (code: string) => ({
  qrCode: 'data:image/png;base64,AA==',
  code,
  expiresAt: '2026-01-15T12:01:00.000Z',
});

describe('an instance page shows the newest of its read and its pushed status, and only this instance', () => {
  const page = pageHarness();
  const instancePage = (id: string) => page.pages.h(page.pages.InstancePage, { me, id });
  /** The status badge's words, or null while the page is loading. */
  const status = () =>
    page.root.all((e) => e.getAttribute('id') === 'instance-status').map((e) => e.textContent)[0] ?? null;
  /** The page's heading, or null while it is loading. */
  const heading = () => page.root.all((e) => e.localName === 'h1').map((e) => e.textContent)[0] ?? null;
  /** The codes of the QR images shown. */
  const codes = () =>
    page.root
      .all((e) => e.localName === 'img' && e.attributes.has('data-code'))
      .map((e) => e.getAttribute('data-code'));

  it('a status pushed while the first read is on its way is not replaced by that read answering later', async () => {
    await page.show(instancePage('x'));
    const [read] = page.made('/instances/x');
    assert.equal(read?.url, '/dashboard/api/instances/x');
    const [stream] = page.sources;
    assert.equal(stream?.url, '/dashboard/api/instances/x/events');
    // The stream sends the status at once, then the phone scans: the pushed status says Logged in.
    await page.act(() => stream?.open());
    await page.act(() => stream?.push('status', summary('x', 'Xis', true)));
    assert.equal(status(), 'Logged in');
    // The read, answered by the server before the scan, arrives last.
    await page.act(() => read?.answer(summary('x', 'Xis', false)));
    assert.equal(status(), 'Logged in', 'the pushed status stays');
    // A later push is shown as ever.
    await page.act(() => stream?.push('status', summary('x', 'Xis', false)));
    assert.equal(status(), 'Not connected');
  });

  it('the previous instance’s read answering after this one’s does not replace it', async () => {
    await page.show(instancePage('x'));
    await page.show(instancePage('y'));
    const [x] = page.made('/instances/x');
    const [y] = page.made('/instances/y');
    assert.ok(x && y);
    assert.equal(page.sources[0]?.closed, true, 'the previous instance’s stream is closed');
    await page.act(() => y.answer(summary('y', 'Ypsilon', false)));
    await page.act(() => x.answer(summary('x', 'Xis', true)));
    assert.match(heading() ?? '', /^Ypsilon/);
    assert.equal(status(), 'Not connected');
    assert.deepEqual(page.alerts(), []);
  });

  it('the previous instance’s failed read shows no error on this one', async () => {
    await page.show(instancePage('x'));
    await page.show(instancePage('y'));
    const [x] = page.made('/instances/x');
    const [y] = page.made('/instances/y');
    await page.act(() => y?.answer(summary('y', 'Ypsilon', false)));
    await page.act(() => x?.fail(404, 'instance not found'));
    assert.match(heading() ?? '', /^Ypsilon/);
    assert.deepEqual(page.alerts(), [], 'no error shown');
  });

  it('an instance opened by its id in capitals is shown once read', async () => {
    const id = '0b6f3a52-1c2d-4e5f-8a9b-0c1d2e3f4a5b';
    await page.show(instancePage(id.toUpperCase()));
    await page.act(() => page.request(0).answer(summary(id, 'Capitals', false)));
    assert.match(heading() ?? '', /^Capitals/);
    assert.equal(status(), 'Not connected');
  });

  it('after another instance is picked, the previous one’s name and QR code are not shown', async () => {
    await page.show(instancePage('x'));
    await page.act(() => page.made('/instances/x')[0]?.answer(summary('x', 'Xis', false)));
    await page.act(() => page.sources[0]?.push('qr', qr('x-code')));
    assert.deepEqual(codes(), ['x-code']);

    await page.show(instancePage('y'));
    assert.equal(
      heading(),
      null,
      `the page waits for the new instance: ${page.root.textContent.slice(0, 80)}`,
    );
    await page.act(() => page.made('/instances/y')[0]?.answer(summary('y', 'Ypsilon', false)));
    assert.match(heading() ?? '', /^Ypsilon/);
    assert.deepEqual(codes(), [], 'no QR code until this instance’s stream sends one');
    await page.act(() => page.sources[1]?.push('qr', qr('y-code')));
    assert.deepEqual(codes(), ['y-code']);
  });
});
