import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

/**
 * Checks the browser tests run on every page of the dashboard (docs/dashboard.md, docs/decisions/0022-dashboard.md,
 * docs/decisions/0047-dashboard-style-library.md): no horizontal overflow, no serious or critical WCAG 2.1 A/AA
 * violation found by axe-core, and no script error in the console.
 */

/** The widths every page must fit and pass axe-core at: a desktop, a common phone, the narrowest phone we serve. */
export const CHECK_WIDTHS = [1440, 390, 360] as const;

/** axe-core's browser build, injected into the page with page.evaluate (outside the page's CSP). */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * Whether the page scrolls sideways: one sentence naming the widths when `document.documentElement` is wider than the
 * viewport, else nothing.
 */
export async function overflowOf(page: Page, where: string): Promise<string[]> {
  const widths = await page.evaluate(() => {
    const root = (globalThis as any).document.documentElement;
    return { scroll: root.scrollWidth, client: root.clientWidth };
  });
  return widths.scroll <= widths.client
    ? []
    : [`${where}: ${widths.scroll} px wide in a ${widths.client} px screen`];
}

/**
 * Waits until every finite animation and transition of the page has finished, so colours are read as the page shows
 * them: a transition still running (Pico's buttons ease their colours over 0.2 s, after a switch to the dark scheme
 * within one document or a hover) would be measured half-way. Endless animations (a spinner) are left running; a
 * cancelled one counts as done.
 */
async function transitionsSettled(page: Page): Promise<void> {
  await page.evaluate(() => {
    const animations: any[] = (globalThis as any).document.getAnimations();
    return Promise.all(
      animations
        .filter((animation) => animation.effect?.getComputedTiming().endTime !== Number.POSITIVE_INFINITY)
        .map((animation) => animation.finished.catch(() => undefined)),
    );
  });
}

/** Injects axe-core into the page unless it is there already. */
async function withAxe(page: Page): Promise<void> {
  if (await page.evaluate(() => (globalThis as any).axe === undefined)) await page.evaluate(AXE_SOURCE);
}

/** The serious and critical WCAG 2.0/2.1 A and AA violations axe-core finds in the page, one sentence each. */
export async function axeViolations(page: Page, where: string): Promise<string[]> {
  await transitionsSettled(page);
  await withAxe(page);
  const violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] =
    await page.evaluate(async () => {
      const g = globalThis as any;
      const result = await g.axe.run(g.document, {
        runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
      });
      return result.violations;
    });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${where}: ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/**
 * Text contrast of the page's buttons while hovered and while focused (WCAG 2.1 success criterion 1.4.3 holds in
 * every state a control shows, not only at rest): for each kind of visible, enabled button (its type, its classes and
 * whether it sits in the top bar) the first one is hovered, then focused, and axe-core's color-contrast rule is run
 * on it once its transition has ended. One sentence per failure, naming the state and the kind; the pointer is moved
 * off and the focus dropped afterwards.
 */
export async function buttonStateContrast(page: Page, where: string): Promise<string[]> {
  await withAxe(page);
  const buttons = page.locator('button:visible:enabled');
  const seen = new Set<string>();
  const found: string[] = [];
  for (let index = 0; index < (await buttons.count()); index += 1) {
    const button = buttons.nth(index);
    const kind = await button.evaluate(
      (element) =>
        `${element.closest('header') === null ? '' : 'header '}button[type=${element.getAttribute('type')}]${[...element.classList].map((c) => `.${c}`).join('')}`,
    );
    if (seen.has(kind)) continue;
    seen.add(kind);
    for (const state of ['hover', 'focus'] as const) {
      if (state === 'hover') await button.hover();
      else await button.focus();
      await transitionsSettled(page);
      const failed: { nodes: unknown[] }[] = await button.evaluate(async (element) => {
        const result = await (globalThis as any).axe.run(element, {
          runOnly: { type: 'rule', values: ['color-contrast'] },
        });
        return result.violations;
      });
      if (failed.length > 0) {
        const text = (await button.innerText()).trim();
        found.push(`${where}: ${state} ${kind} ("${text}"): color-contrast`);
      }
      await page.mouse.move(0, 0);
      await button.evaluate((element) => (element as any).blur());
    }
  }
  return found;
}

/**
 * Console messages the tests expect: the browser logs every refused request (a wrong password 401, a viewer's 403,
 * a slowed sign-in 429) as a failed resource load. Any other console error is a fault.
 */
const EXPECTED = /^Failed to load resource: the server responded with a status of (401|403|429)\b/;

/**
 * Collects the page's script errors (uncaught exceptions), console errors other than the expected refused requests,
 * and Content-Security-Policy violations. `take()` returns what arrived since the last call and forgets it.
 */
export function watchConsole(page: Page): { take(): string[] } {
  let errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' && !EXPECTED.test(message.text()))
      errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  return {
    take() {
      const taken = errors;
      errors = [];
      return taken;
    },
  };
}
