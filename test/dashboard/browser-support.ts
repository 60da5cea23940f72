import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { DASHBOARD_DIST } from '../../src/http/routes/dashboard/static.ts';
import { createTestApp, type ManualClock, type TestApp, type TestAppOptions } from '../support/app.ts';
import { TEST_CA } from '../support/https-receiver.ts';
import { watchConsole } from './browser-checks.ts';
import { createUser, PASSWORD } from './support.ts';

/** Debian's Chromium (installed by .ci/run); never a downloaded browser. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Whether the browser tests can run here; scripts/test.js reports them as not run otherwise. */
export const chromiumAvailable: boolean = existsSync(CHROMIUM);

/** Flags for a headless Chromium that talks to nothing but the page under test. */
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Launches Debian's Chromium through playwright-core. */
async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

/**
 * A new page of `browser`, in a context of its own at 1200×860 px whose relative URLs resolve against `url`, waiting
 * up to 15 s by default; `clipboard` grants it the clipboard. → the page and what it logs (browser-checks.ts
 * `watchConsole`: script errors and console errors, refused requests excepted).
 */
async function dashboardPage(
  browser: Browser,
  url: string,
  options: { clipboard?: boolean } = {},
): Promise<{ page: Page; consoleErrors: { take(): string[] } }> {
  const context = await browser.newContext({ viewport: { width: 1200, height: 860 }, baseURL: url });
  if (options.clipboard)
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  return { page, consoleErrors: watchConsole(page) };
}

/** What a browser suite's `start` hands to {@link chromiumSuite}. */
export interface SuiteTarget {
  /** The dashboard server's base URL (`http://127.0.0.1:<port>`); the page's relative URLs resolve against it. */
  url: string;
  /** An e-mail to sign in as (with support.ts `PASSWORD`) before the first test; omitted, the page stays blank. */
  signInAs?: string;
}

/** The browser and page a {@link chromiumSuite} opened, readable from its first test on. */
export interface ChromiumSuite {
  readonly browser: Browser;
  readonly page: Page;
  /** {@link SuiteTarget.url}. */
  readonly url: string;
  /** Waits for a notice (the dashboard's toast) whose text has `text`. */
  notice(text: string | RegExp): Promise<void>;
  /** Fills and submits the sign-in form the page shows ({@link submitSignIn}). */
  signIn(email: string, password: string): Promise<void>;
}

/**
 * Registers, in the calling `describe`, the hooks every dashboard suite in Chromium shares. Before the first test:
 * builds the bundle when missing, runs `start` (which starts the app and whatever else the suite needs, handing each
 * closer to `defer`), launches Chromium, opens a {@link dashboardPage} (`clipboard` grants the clipboard; `timeoutMs`,
 * 15,000 by default, is its wait limit) and, when `start` names a user, signs in on /dashboard/ and waits for the
 * Instances page. After each test: fails it when the page logged a script or console error during it. After the
 * last: closes the browser, then what `defer` was given, last first, even when `start` stopped half-way.
 * @throws Error when `browser`, `page` or `url` is read before the suite has started.
 */
export function chromiumSuite(
  start: (defer: (close: () => Promise<void>) => void) => Promise<SuiteTarget>,
  options: { clipboard?: boolean; timeoutMs?: number } = {},
): ChromiumSuite {
  const closers: (() => Promise<void>)[] = [];
  let opened: { browser: Browser; page: Page; url: string; consoleErrors: { take(): string[] } } | undefined;
  const ready = () => {
    if (opened === undefined) throw new Error('the browser suite has not started');
    return opened;
  };
  before(async () => {
    await ensureBundle();
    const target = await start((close) => closers.push(close));
    const browser = await launchChromium();
    closers.push(() => browser.close());
    const { page, consoleErrors } = await dashboardPage(browser, target.url, options);
    if (options.timeoutMs !== undefined) page.setDefaultTimeout(options.timeoutMs);
    opened = { browser, page, url: target.url, consoleErrors };
    if (target.signInAs === undefined) return;
    await page.goto('/dashboard/');
    await submitSignIn(page, target.signInAs, PASSWORD);
    await page.getByRole('heading', { name: 'Instances' }).waitFor();
  });
  afterEach(() => {
    if (opened) assert.deepEqual(opened.consoleErrors.take(), [], 'no console error and no page error');
  });
  after(async () => {
    for (const close of closers.reverse()) await close();
  });
  return {
    get browser() {
      return ready().browser;
    },
    get page() {
      return ready().page;
    },
    get url() {
      return ready().url;
    },
    notice: (text) => ready().page.locator('.notice', { hasText: text }).first().waitFor(),
    signIn: (email, password) => submitSignIn(ready().page, email, password),
  };
}

/**
 * Fills the sign-in form `page` shows with `email` and `password` and submits it; the outcome is the caller's to
 * wait for.
 */
export async function submitSignIn(page: Page, email: string, password: string): Promise<void> {
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Builds the dashboard bundle into dist/dashboard when it is missing (what `npm start` does first). */
async function ensureBundle(): Promise<void> {
  if (existsSync(join(DASHBOARD_DIST, 'index.html'))) return;
  const { build } = await import('vite');
  await build({
    configFile: new URL('../../web/vite.config.ts', import.meta.url).pathname,
    logLevel: 'warn',
  });
}

/**
 * A clock that is the real one (QR codes rotate, sessions age) behind the test app's ManualClock type, except while
 * held: `set(ms)` holds it at `ms` (epoch milliseconds), so a wait the app imposes cannot run out however slowly the
 * browser moves; `advance(ms)` moves a held clock on; `release()` lets it follow the real time again.
 */
export interface RealClock extends ManualClock {
  release(): void;
}

/** A {@link RealClock}, following the real time until held. */
export function realClock(): RealClock {
  let held: number | undefined;
  return Object.assign(() => held ?? Date.now(), {
    advance: (ms: number) => {
      if (held !== undefined) held += ms;
    },
    set: (ms: number) => {
      held = ms;
    },
    release: () => {
      held = undefined;
    },
  });
}

/** A test app listening on 127.0.0.1 (a real browser needs a socket), its webhooks allowed to a local receiver. */
export async function listeningApp(
  options: TestAppOptions = {},
): Promise<{ t: TestApp; url: string; clock: RealClock }> {
  const clock = realClock();
  const t = await createTestApp({
    clock,
    outboundCa: TEST_CA,
    webhookWorker: { pollIntervalMs: 25 },
    ...options,
    env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_SCHEDULE: '1,2,3', ...options.env },
  });
  const url = await t.app.listen({ host: '127.0.0.1', port: 0 });
  return { t, url, clock };
}

/**
 * Creates test instance `name` in `t`'s organization and links it through the API, as a sign-in, a connect and a
 * sandbox scan from `phone` in the dashboard would: the state the flow of browser.test.ts leaves for the suites
 * that start further on. Returns the instance's id.
 * @throws AssertionError when the connect or the scan is not answered 200.
 */
async function linkedTestInstance(t: TestApp, name: string, phone: string): Promise<string> {
  const instanceId = (await t.newInstance('test', name)).id;
  for (const [path, body] of [
    ['/v1/session/connect', {}],
    ['/v1/sandbox/scan', { phone }],
  ] as const) {
    const response = await t.call('POST', `${path}?from=${instanceId}`, body);
    assert.equal(response.status, 200, `${path}: ${JSON.stringify(response.body)}`);
  }
  return instanceId;
}

/**
 * The start of a suite that begins signed in with a linked instance: a {@link listeningApp} (closed after the suite
 * through `defer`), its owner `owner@example.com` and the linked test instance `browser-test` of phone
 * 5511999990042 ({@link linkedTestInstance}). → the app, its URL, the owner's e-mail and the instance's id.
 */
export async function appWithLinkedInstance(
  defer: (close: () => Promise<void>) => void,
): Promise<{ t: TestApp; url: string; owner: string; instanceId: string }> {
  const { t, url } = await listeningApp();
  defer(() => t.close());
  const owner = await createUser(t, 'owner', 'owner@example.com');
  const instanceId = await linkedTestInstance(t, 'browser-test', '5511999990042');
  return { t, url, owner, instanceId };
}

/**
 * Where screenshots go: docs/images (committed, shown in the README) when UPDATE_SCREENSHOTS=1, else a temporary
 * folder, so an ordinary test run leaves the work tree clean.
 */
export const SCREENSHOTS: string =
  process.env.UPDATE_SCREENSHOTS === '1'
    ? new URL('../../docs/images/', import.meta.url).pathname
    : mkdtempSync(join(tmpdir(), 'parley-shots-'));
mkdirSync(SCREENSHOTS, { recursive: true });

/** The two widths every page is pictured at: a desktop and a phone (docs/dashboard.md). */
export const SHOT_WIDTHS = [
  { width: 1440, height: 900, suffix: '' },
  { width: 390, height: 844, suffix: '-phone' },
] as const;

/**
 * Saves a screenshot of the viewport (or of the element `selector` names) as `dashboard-<name>.png`, as a palette PNG
 * through sharp so the committed images stay small (a few tens of KB).
 */
export async function screenshot(page: Page, name: string, selector?: string): Promise<void> {
  const path = join(SCREENSHOTS, `dashboard-${name}.png`);
  const shot =
    selector === undefined
      ? await page.screenshot({ fullPage: false })
      : await page.locator(selector).first().screenshot();
  await sharp(shot).png({ palette: true, quality: 90, compressionLevel: 9, effort: 8 }).toFile(path);
}

/**
 * Screenshots of the viewport (or of the element `selector` names) at 1440 px (`dashboard-<name>.png`) and at 390 px
 * (`dashboard-<name>-phone.png`), then gives the page its viewport back. The page is laid out again at each width
 * first: the charts redraw on the resize event.
 */
export async function screenshots(page: Page, name: string, selector?: string): Promise<void> {
  const before = page.viewportSize();
  // The pointer rests on the brand, not on whatever was clicked last (a hovered link looks current).
  await page.mouse.move(1, 1);
  try {
    for (const size of SHOT_WIDTHS) {
      await page.setViewportSize({ width: size.width, height: size.height });
      await page.evaluate(
        () =>
          new Promise((resolve) => {
            const g = globalThis as any;
            g.dispatchEvent(new Event('resize'));
            g.requestAnimationFrame(() => g.requestAnimationFrame(() => resolve(undefined)));
          }),
      );
      if (selector !== undefined) await page.locator(selector).first().scrollIntoViewIfNeeded();
      else await page.evaluate(() => (globalThis as any).scrollTo(0, 0));
      await screenshot(page, `${name}${size.suffix}`, selector);
    }
  } finally {
    if (before) await page.setViewportSize(before);
  }
}
