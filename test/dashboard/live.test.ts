import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { control, type LiveApp, liveApp, startTestSimulator } from '../live/support.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { chromiumAvailable, chromiumSuite, realClock } from './browser-support.ts';
import { createUser } from './support.ts';

/**
 * The dashboard on a live instance (Baileys against the platform simulator), in Chromium: the QR code on screen is
 * scanned through the simulator's control API and the page turns logged in by itself; a message from a simulated
 * user reaches the webhook and shows in the delivery log; a second instance links by pairing code typed on the
 * simulated phone.
 */
if (chromiumAvailable) {
  describe('dashboard in Chromium on a live instance against the simulator', () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5511999990300';
    const ana = '5511988887300';
    const shop2 = '5511966665300';

    const ui = chromiumSuite(
      async (defer) => {
        sim = await startTestSimulator();
        defer(() => sim.close());
        receiver = await startReceiver();
        defer(() => receiver.close());
        app = await liveApp(sim, { clock: realClock() });
        defer(() => app.t.close());
        await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
        await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
        await control(sim, 'POST', '/users', { phone: shop2, pushName: 'Shop 2' });
        await app.t.newInstance('live', 'sim2');
        const url = await app.t.app.listen({ host: '127.0.0.1', port: 0 });
        return { url, signInAs: await createUser(app.t, 'member', 'live@example.com') };
      },
      { timeoutMs: 20_000 },
    );

    it('links by scanning the QR on screen through the simulator, without reloading', async () => {
      await ui.page.getByRole('link', { name: 'sim', exact: true }).click();
      await ui.page.getByRole('heading', { name: /sim/ }).waitFor();
      await ui.page.getByRole('button', { name: 'Connect', exact: true }).click();
      const qr = ui.page.getByRole('img', { name: /QR code/ });
      await qr.waitFor();
      const code = (await qr.getAttribute('data-code')) ?? '';
      assert.ok(code.split(',').length >= 4, `a pairing string: ${code}`);
      assert.equal(
        await ui.page.getByRole('button', { name: 'Scan the QR code' }).count(),
        0,
        'no sandbox on live',
      );
      const scan = await control(sim, 'POST', '/scan', { code, phone: shop });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      await ui.page.locator('#instance-status', { hasText: /^Logged in$/ }).waitFor();
      await ui.page.getByText(shop, { exact: true }).waitFor();
      await qr.waitFor({ state: 'detached' });
    });

    it('delivers a simulated user’s message to the webhook and shows it in the log', async () => {
      await ui.page.getByLabel('Webhook URL (HTTPS)').fill(receiver.url);
      await ui.page.getByRole('button', { name: 'Save URL' }).click();
      await ui.page.locator('.notice', { hasText: 'Webhook URL saved' }).waitFor();
      const sent = await control(sim, 'POST', '/messages', {
        from: ana,
        to: shop,
        text: 'hello, live dashboard',
      });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      const [request] = await receiver.waitFor(
        (requests) => requests.some((r) => JSON.parse(r.body.toString()).type === 'Message'),
        20_000,
      );
      assert.ok(request);
      const message = receiver.requests.find((r) => JSON.parse(r.body.toString()).type === 'Message');
      const body = JSON.parse(message?.body.toString() ?? '{}');
      assert.equal(body.event.message.conversation, 'hello, live dashboard');
      const row = ui.page.locator(`tr[data-delivery="${message?.headers['webhook-id']}"]`);
      await row.locator('td', { hasText: 'delivered' }).waitFor();
      await ui.page.getByRole('button', { name: 'Disconnect' }).click();
      await ui.page.locator('#instance-status', { hasText: 'Logged in, disconnected' }).waitFor();
    });

    it('links a second live instance by pairing code: the code shown on screen, typed on the phone', async () => {
      await ui.page.goto('/dashboard/');
      await ui.page.getByRole('link', { name: 'sim2', exact: true }).click();
      await ui.page.getByRole('heading', { name: /sim2/ }).waitFor();
      await ui.page.getByRole('button', { name: 'Connect', exact: true }).click();
      await ui.page.getByRole('img', { name: /QR code/ }).waitFor();
      await ui.page.getByLabel(/Or link by code/).fill(shop2);
      await ui.page.getByRole('button', { name: 'Get pairing code' }).click();
      const notice = ui.page.getByText(/^Type this code on the phone: /);
      await notice.waitFor();
      const code = ((await notice.textContent()) ?? '').replace('Type this code on the phone: ', '').trim();
      assert.match(code, /^[0-9A-Z]{4}-?[0-9A-Z]{4}$/);
      const typed = await control(sim, 'POST', '/pairing-code', { code, phone: shop2 });
      assert.equal(typed.status, 200, JSON.stringify(typed.body));
      await ui.page.locator('#instance-status', { hasText: /^Logged in$/ }).waitFor();
      await ui.page.getByText(shop2, { exact: true }).waitFor();
    });
  });
}
