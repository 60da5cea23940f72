import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  axeViolations,
  buttonStateContrast,
  CHECK_WIDTHS,
  overflowOf,
  watchConsole,
} from './browser-checks.ts';
import {
  chromiumAvailable,
  chromiumSuite,
  listeningApp,
  screenshot,
  submitSignIn,
} from './browser-support.ts';
import { createUser, PASSWORD } from './support.ts';

/**
 * The dashboard's layout, accessibility and times in Chromium (docs/decisions/0047-dashboard-style-library.md):
 * every page, the sign-in page included, at 1440, 390 and 360 px without sideways scrolling and without a serious or
 * critical axe-core violation, in the light and the dark scheme; every kind of button readable while hovered and
 * while focused; and times written in the browser's zone and
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
    let owner: string;
    let instanceId = '';
    const ui = chromiumSuite(async (defer) => {
      const { t, url } = await listeningApp();
      defer(() => t.close());
      owner = await createUser(t, 'owner', 'owner@example.com');
      return { url };
    });

    /** Signs `email` in on `on` (the sign-in page is shown). */
    const signIn = async (on: Page, email: string) => {
      await submitSignIn(on, email, PASSWORD);
      await on.getByRole('heading', { name: 'Instances' }).waitFor();
    };

    /** Goes to the dashboard page `hash` and waits for its heading `heading`. */
    const open = async (hash: string, heading: string) => {
      await ui.page.goto(`/dashboard/${hash}`);
      await ui.page.getByRole('heading', { name: heading, exact: false }).first().waitFor();
    };

    it('fits the sign-in page into every width, with no serious or critical axe-core violation', async () => {
      await ui.page.goto('/dashboard/');
      await ui.page.getByRole('heading', { name: 'Sign in to parley' }).waitFor();
      const found: string[] = [];
      for (const width of CHECK_WIDTHS) {
        await ui.page.setViewportSize({ width, height: 860 });
        found.push(...(await overflowOf(ui.page, `${width} px sign-in`)));
        found.push(...(await axeViolations(ui.page, `${width} px sign-in`)));
      }
      await ui.page.setViewportSize({ width: 1200, height: 860 });
      assert.deepEqual(found, []);
    });

    it('links a test instance and receives a message, so every page has content', async () => {
      await signIn(ui.page, owner);
      await ui.page.getByLabel('Name').fill('layout-test');
      await ui.page.getByRole('button', { name: 'Create instance' }).click();
      await ui.page.getByRole('link', { name: 'layout-test' }).click();
      await ui.page.getByRole('heading', { name: /layout-test/ }).waitFor();
      instanceId = new URL(ui.page.url()).hash.split('/')[2] ?? '';
      await ui.page.getByRole('button', { name: 'Connect', exact: true }).click();
      await ui.page.getByRole('img', { name: /QR code/ }).waitFor();
      await ui.page.getByRole('button', { name: 'Scan the QR code' }).click();
      await ui.page.locator('#instance-status', { hasText: /^Logged in$/ }).waitFor();
      await ui.page.getByLabel('From phone').fill('5511988887777');
      await ui.page.getByLabel('Message text').fill('hello from the layout test');
      await ui.page.getByRole('button', { name: 'Send inbound message' }).click();
      await ui.page.locator('section[aria-labelledby="section-webhook"] tr[data-delivery]').first().waitFor();
      assert.match(instanceId, /^[0-9a-f-]{36}$/);
    });

    it('fits every page into 1440, 390 and 360 px without horizontal scrolling, with no serious or critical axe-core violation, in light and dark', async () => {
      const found: string[] = [];
      try {
        for (const width of CHECK_WIDTHS) {
          await ui.page.setViewportSize({ width, height: 860 });
          for (const [hash, heading] of PAGES(instanceId)) {
            await open(hash, heading);
            found.push(...(await overflowOf(ui.page, `${width} px ${hash}`)));
            found.push(...(await axeViolations(ui.page, `${width} px ${hash}`)));
          }
        }
        // The dark scheme (Pico follows the system's) passes too.
        await ui.page.setViewportSize({ width: 1440, height: 900 });
        await ui.page.emulateMedia({ colorScheme: 'dark' });
        for (const [hash, heading] of PAGES(instanceId)) {
          await open(hash, heading);
          found.push(...(await axeViolations(ui.page, `dark ${hash}`)));
        }
        await ui.page.goto(`/dashboard/#/instances/${instanceId}`);
        await ui.page
          .locator('section[aria-labelledby="section-webhook"] tr[data-delivery]')
          .first()
          .waitFor();
        await ui.page.mouse.move(1, 1);
        await screenshot(ui.page, 'dark');
      } finally {
        await ui.page.emulateMedia({ colorScheme: 'light' });
        await ui.page.setViewportSize({ width: 1200, height: 860 });
      }
      assert.deepEqual(found, []);
    });

    it('keeps every kind of button readable while hovered and while focused, in light and dark', async () => {
      const found: string[] = [];
      try {
        await ui.page.setViewportSize({ width: 1440, height: 900 });
        for (const scheme of ['light', 'dark'] as const) {
          await ui.page.emulateMedia({ colorScheme: scheme });
          for (const [hash, heading] of PAGES(instanceId)) {
            await open(hash, heading);
            found.push(...(await buttonStateContrast(ui.page, `${scheme} ${hash}`)));
          }
        }
      } finally {
        await ui.page.emulateMedia({ colorScheme: 'light' });
        await ui.page.setViewportSize({ width: 1200, height: 860 });
      }
      assert.deepEqual(found, []);
    });

    it('writes times in the browser’s time zone and language, naming the zone, with UTC in the title', async () => {
      const elsewhere = await ui.browser.newContext({
        baseURL: ui.url,
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
