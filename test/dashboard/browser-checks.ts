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

/** The serious and critical WCAG 2.0/2.1 A and AA violations axe-core finds in the page, one sentence each. */
export async function axeViolations(page: Page, where: string): Promise<string[]> {
  // Colours are read as the page shows them: a transition still running (Pico's buttons ease their colours over
  // 0.2 s, as after a switch to the dark scheme within one document) would be measured half-way.
  // Endless animations (a spinner) are left running; a cancelled one counts as done.
  await page.evaluate(() => {
    const animations: any[] = (globalThis as any).document.getAnimations();
    return Promise.all(
      animations
        .filter((animation) => animation.effect?.getComputedTiming().endTime !== Number.POSITIVE_INFINITY)
        .map((animation) => animation.finished.catch(() => undefined)),
    );
  });
  await page.evaluate(AXE_SOURCE);
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
