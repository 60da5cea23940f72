import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { DASHBOARD_DIST } from '../../src/http/routes/dashboard/static.ts';
import { createTestApp, type ManualClock, type TestApp, type TestAppOptions } from '../support/app.ts';
import { TEST_CA } from '../support/https-receiver.ts';

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
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

/** Builds the dashboard bundle into dist/dashboard when it is missing (what `npm start` does first). */
export async function ensureBundle(): Promise<void> {
  if (existsSync(join(DASHBOARD_DIST, 'index.html'))) return;
  const { build } = await import('vite');
  await build({
    configFile: new URL('../../web/vite.config.ts', import.meta.url).pathname,
    logLevel: 'warn',
  });
}

/** A clock that is the real one (QR codes rotate, sessions age) behind the test app's ManualClock type. */
export function realClock(): ManualClock {
  return Object.assign(() => Date.now(), { advance: () => undefined, set: () => undefined });
}

/** A test app listening on 127.0.0.1 (a real browser needs a socket), its webhooks allowed to a local receiver. */
export async function listeningApp(options: TestAppOptions = {}): Promise<{ t: TestApp; url: string }> {
  const t = await createTestApp({
    clock: realClock(),
    outboundCa: TEST_CA,
    webhookWorker: { pollIntervalMs: 25 },
    ...options,
    env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_SCHEDULE: '1,2,3', ...options.env },
  });
  const url = await t.app.listen({ host: '127.0.0.1', port: 0 });
  return { t, url };
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

/** Saves a screenshot of the viewport (or of the element `selector` names) as `dashboard-<name>.png`. */
export async function screenshot(page: Page, name: string, selector?: string): Promise<void> {
  const path = join(SCREENSHOTS, `dashboard-${name}.png`);
  if (selector === undefined) await page.screenshot({ path, fullPage: false });
  else await page.locator(selector).screenshot({ path });
}
