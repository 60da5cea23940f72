import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import type { TestApp } from '../support/app.ts';
import { startReceiver } from '../support/https-receiver.ts';
import { appWithLinkedInstance, chromiumAvailable, chromiumSuite, screenshots } from './browser-support.ts';

/**
 * An instance's webhook endpoints in the dashboard, in a real browser (Debian's Chromium through playwright-core),
 * signed in as the organization's owner on the page of a logged-in test instance `browser-test`: an endpoint added
 * with its event filter, its secret shown once and copied, an inbound message it receives signed with that secret
 * (checked with `standardwebhooks`), its delivery log and a redelivery, then disabled and deleted after a
 * confirmation. The flow from sign-in to a redelivered webhook of the default URL: browser.test.ts.
 */
if (chromiumAvailable) {
  describe('dashboard webhook endpoints in Chromium', () => {
    let t: TestApp;
    let instanceId = '';
    const ui = chromiumSuite(
      async (defer) => {
        let owner: string;
        let url: string;
        ({ t, url, owner, instanceId } = await appWithLinkedInstance(defer));
        return { url, signInAs: owner };
      },
      { clipboard: true },
    );
    before(async () => {
      await ui.page.getByRole('link', { name: 'browser-test' }).click();
      await ui.page.getByRole('heading', { name: /browser-test/ }).waitFor();
      await ui.page.locator('#instance-status', { hasText: /^Logged in$/ }).waitFor();
    });

    it('adds a webhook endpoint, shows its secret once, logs and redelivers to it, disables and deletes it', async () => {
      const target = await startReceiver();
      try {
        const panel = ui.page.getByRole('region', { name: 'Webhook endpoints' });
        await panel.getByText('No endpoints yet.').waitFor();
        await panel.getByLabel('Endpoint URL (https://, amqp(s):// or nats://)').fill(target.url);
        await panel.getByLabel('Endpoint description (optional)').fill('browser endpoint');
        const events = panel.getByRole('group', { name: 'Endpoint events' });
        assert.equal(await events.getByRole('checkbox').count(), 10, 'every event type the server lists');
        assert.equal(await events.getByRole('checkbox', { name: 'Message', exact: true }).isChecked(), true);
        await events.getByRole('checkbox', { name: 'ReadReceipt', exact: true }).check();
        await panel.getByRole('button', { name: 'Add endpoint' }).click();
        await ui.notice('Endpoint added');
        const shown = panel.getByLabel(/^Signing secret of .*: shown only this once, store it now$/);
        const secret = await shown.inputValue();
        assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/);
        await panel.getByRole('button', { name: 'Copy secret' }).click();
        await ui.notice('Copied to the clipboard');
        assert.equal(
          await ui.page.evaluate(() => (globalThis as any).navigator.clipboard.readText()),
          secret,
        );
        const row = panel.locator('tr[data-endpoint]', { hasText: target.url });
        await row.getByRole('cell', { name: 'Message, ReadReceipt' }).waitFor();
        await row.getByRole('cell', { name: 'browser endpoint' }).waitFor();
        await row.getByRole('cell', { name: 'Enabled', exact: true }).waitFor();
        await screenshots(ui.page, 'endpoints', 'section[aria-labelledby="section-webhook-endpoints"]');

        // The endpoint receives the inbound message, signed with its own secret (Standard Webhooks).
        await ui.page.getByLabel('From phone').fill('5511988887777');
        await ui.page.getByLabel('Message text').fill('hello, endpoint');
        await ui.page.getByRole('button', { name: 'Send inbound message' }).click();
        const [first] = await target.waitForCount(1, 10_000);
        assert.ok(first);
        const eventId = String(first.headers['webhook-id']);
        const headers = {
          'webhook-id': eventId,
          'webhook-timestamp': String(first.headers['webhook-timestamp']),
          'webhook-signature': String(first.headers['webhook-signature']),
        };
        const body = new Webhook(secret).verify(first.body.toString(), headers) as { type: string };
        assert.equal(body.type, 'Message');
        await row.getByRole('button', { name: 'Deliveries' }).click();
        const delivery = panel.locator(`tr[data-endpoint-delivery="${eventId}"]`);
        await delivery.locator('td', { hasText: 'delivered' }).waitFor();
        await delivery.getByRole('button', { name: /Redeliver/ }).click();
        await ui.notice(/^Event \d+ queued for redelivery$/);
        await target.waitFor(
          (requests) => requests.filter((r) => r.headers['webhook-id'] === eventId).length === 2,
          10_000,
        );
        await delivery.getByText(/^Attempt 2: HTTP 200 · \d+ ms$/).waitFor();

        // Shown once: gone after Done, and never in the page again.
        await panel.getByRole('button', { name: 'Done' }).click();
        await shown.waitFor({ state: 'detached' });
        await ui.page.reload();
        await row.getByRole('cell', { name: 'Enabled', exact: true }).waitFor();
        assert.equal(await panel.getByLabel(/shown only this once/).count(), 0);
        const onPage = await ui.page.evaluate(() => {
          const document = (globalThis as any).document;
          const values = [...document.querySelectorAll('input')].map(
            (input: { value: string }) => input.value,
          );
          return [document.body.innerText, document.documentElement.outerHTML, ...values].join('\n');
        });
        assert.ok(!onPage.includes(secret), 'the secret is not shown again');

        await row.getByRole('button', { name: 'Disable' }).click();
        await ui.notice(`Endpoint ${target.url} disabled`);
        await row.getByRole('cell', { name: 'Disabled', exact: true }).waitFor();
        const [stored] = await t.testStore.store.db
          .selectFrom('webhook_endpoints')
          .select(['enabled'])
          .where('instance_id', '=', instanceId)
          .execute();
        assert.equal(Boolean(stored?.enabled), false);

        // Deleting asks first in a dialog, as every action that cannot be undone does.
        await row.getByRole('button', { name: `Delete endpoint ${target.url}` }).click();
        const deletion = ui.page.getByRole('dialog', { name: `Delete the endpoint ${target.url}?` });
        await deletion.getByText(/queued deliveries are deleted with it/).waitFor();
        await deletion.getByRole('button', { name: 'Delete endpoint' }).click();
        await ui.notice(`Endpoint ${target.url} deleted`);
        await row.waitFor({ state: 'detached' });
        await panel.getByText('No endpoints yet.').waitFor();
        const left = await t.testStore.store.db
          .selectFrom('webhook_endpoints')
          .select('id')
          .where('instance_id', '=', instanceId)
          .execute();
        assert.deepEqual(left, []);
      } finally {
        await target.close();
      }
    });
  });
}
