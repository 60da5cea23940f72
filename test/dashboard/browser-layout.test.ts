import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { TestApp } from '../support/app.ts';
import { axeViolations, CHECK_WIDTHS, overflowOf, watchConsole } from './browser-checks.ts';
import {
  chromiumAvailable,
  dashboardPage,
  ensureBundle,
  launchChromium,
  listeningApp,
  screenshot,
  submitSignIn,
} from './browser-support.ts';
import { createUser, PASSWORD } from './support.ts';

/**
 * The dashboard's layout, accessibility and times in Chromium (docs/decisions/0047-dashboard-style-library.md):
 * every page, the sign-in page included, at 1440, 390 and 360 px without sideways scrolling and without a serious or
 * critical axe-core violation, in the light and the dark scheme; and times written in the browser's zone and
 * language. The pages hold a logged-in test instance with a message, so their tables, badges and charts are drawn.
 */
/** Every page of the dashboard an owner sees, as its hash and the text of its heading. */
const PAGES = (instanceId: string): [string, string][] => [
  ['#/instances', 'Instances'],
  [`#/instances/${instanceId}`, 'layout-test'],
  ['#/keys', 'API keys'],
  ['#/usage', 'Usage'],
  ['#/users', 'Users'],
  ['#/password', 'Your password'],
];

if (chromiumAvailable) {
  describe('dashboard layout in Chromium', () => {
    let t: TestApp;
    let url: string;
    let browser: Browser;
    let page: Page;
    let owner: string;
    let instanceId = '';
    let consoleErrors: { take(): string[] };

    /** Signs `email` in on `on` (the sign-in page is shown). */
    const signIn = async (on: Page, email: string) => {
      await submitSignIn(on, email, PASSWORD);
      await on.getByRole('heading', { name: 'Instances' }).waitFor();
    };

    before(async () => {
      await ensureBundle();
      ({ t, url } = await listeningApp());
      owner = await createUser(t, 'owner', 'owner@example.com');
      browser = await launchChromium();
      ({ page, consoleErrors } = await dashboardPage(browser, url));
    });
    // Any script error or console error fails the test during which it happened.
    afterEach(() => {
      assert.deepEqual(consoleErrors.take(), [], 'no console error and no page error');
    });
    after(async () => {
      await browser?.close();
      await t?.close();
    });

    it('fits the sign-in page into every width, with no serious or critical axe-core violation', async () => {
      await page.goto('/dashboard/');
      await page.getByRole('heading', { name: 'Sign in to parley' }).waitFor();
      const found: string[] = [];
      for (const width of CHECK_WIDTHS) {
        await page.setViewportSize({ width, height: 860 });
        found.push(...(await overflowOf(page, `${width} px sign-in`)));
        found.push(...(await axeViolations(page, `${width} px sign-in`)));
      }
      await page.setViewportSize({ width: 1200, height: 860 });
      assert.deepEqual(found, []);
    });

    it('links a test instance and receives a message, so every page has content', async () => {
      await signIn(page, owner);
      await page.getByLabel('Name').fill('layout-test');
      await page.getByRole('button', { name: 'Create instance' }).click();
      await page.getByRole('link', { name: 'layout-test' }).click();
      await page.getByRole('heading', { name: /layout-test/ }).waitFor();
      instanceId = new URL(page.url()).hash.split('/')[2] ?? '';
      await page.getByRole('button', { name: 'Connect', exact: true }).click();
      await page.getByRole('img', { name: /QR code/ }).waitFor();
      await page.getByRole('button', { name: 'Scan the QR code' }).click();
      await page.locator('#instance-status', { hasText: /^Logged in$/ }).waitFor();
      await page.getByLabel('From phone').fill('5511988887777');
      await page.getByLabel('Message text').fill('hello from the layout test');
      await page.getByRole('button', { name: 'Send inbound message' }).click();
      await page.locator('section[aria-labelledby="section-webhook"] tr[data-delivery]').first().waitFor();
      assert.match(instanceId, /^[0-9a-f-]{36}$/);
    });

    it('fits every page into 1440, 390 and 360 px without horizontal scrolling, with no serious or critical axe-core violation, in light and dark', async () => {
      const found: string[] = [];
      try {
        for (const width of CHECK_WIDTHS) {
          await page.setViewportSize({ width, height: 860 });
          for (const [hash, heading] of PAGES(instanceId)) {
            await page.goto(`/dashboard/${hash}`);
            await page.getByRole('heading', { name: heading, exact: false }).first().waitFor();
            found.push(...(await overflowOf(page, `${width} px ${hash}`)));
            found.push(...(await axeViolations(page, `${width} px ${hash}`)));
          }
        }
        // The dark scheme (Pico follows the system's) passes too.
        await page.setViewportSize({ width: 1440, height: 900 });
        await page.emulateMedia({ colorScheme: 'dark' });
        for (const [hash, heading] of PAGES(instanceId)) {
          await page.goto(`/dashboard/${hash}`);
          await page.getByRole('heading', { name: heading, exact: false }).first().waitFor();
          found.push(...(await axeViolations(page, `dark ${hash}`)));
        }
        await page.goto(`/dashboard/#/instances/${instanceId}`);
        await page.locator('section[aria-labelledby="section-webhook"] tr[data-delivery]').first().waitFor();
        await page.mouse.move(1, 1);
        await screenshot(page, 'dark');
      } finally {
        await page.emulateMedia({ colorScheme: 'light' });
        await page.setViewportSize({ width: 1200, height: 860 });
      }
      assert.deepEqual(found, []);
    });

    it('writes times in the browser’s time zone and language, naming the zone, with UTC in the title', async () => {
      const elsewhere = await browser.newContext({
        baseURL: url,
        timezoneId: 'America/Sao_Paulo',
        locale: 'pt-BR',
      });
      try {
        const other = await elsewhere.newPage();
        const errors = watchConsole(other);
        await other.goto('/dashboard/');
        await signIn(other, owner);
        await other.getByRole('link', { name: 'Users' }).click();
        const cell = other.getByRole('row').filter({ hasText: owner }).locator('time');
        await cell.waitFor();
        const at = new Date((await cell.getAttribute('datetime')) ?? '');
        assert.ok(Math.abs(at.getTime() - Date.now()) < 120_000, `just signed in: ${at.toISOString()}`);
        const text = await cell.innerText();
        const local = new Intl.DateTimeFormat('pt-BR', {
          timeZone: 'America/Sao_Paulo',
          hour: '2-digit',
          minute: '2-digit',
          hourCycle: 'h23',
        }).format(at);
        assert.ok(text.includes(local), `${text} shows São Paulo's ${local}`);
        assert.match(text, /BRT|GMT-3|UTC-3/, 'the zone is named');
        assert.match(text, /de \p{L}+\.? de \d{4}/u, 'the date is written in Portuguese');
        assert.equal(
          await cell.getAttribute('title'),
          `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`,
        );
        // The instance page's times (last connected, the delivery log, the messages) are written the same way.
        await other.goto(`/dashboard/#/instances/${instanceId}`);
        const times = other.locator('main time');
        await other
          .locator('section[aria-labelledby="section-webhook"] tr[data-delivery] time')
          .first()
          .waitFor();
        const texts = await times.allInnerTexts();
        assert.ok(texts.length >= 2, `times on the instance page: ${texts.join(' | ')}`);
        for (const shown of texts) assert.match(shown, /BRT|GMT-3|UTC-3/, shown);
        assert.deepEqual(errors.take(), []);
      } finally {
        await elsewhere.close();
      }
    });
  });
}
