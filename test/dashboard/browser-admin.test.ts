import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { appWithLinkedInstance, chromiumAvailable, chromiumSuite, screenshots } from './browser-support.ts';
import { createUser, PASSWORD } from './support.ts';

/**
 * The dashboard's keys, usage, users and confirmations in a real browser (Debian's Chromium through
 * playwright-core), signed in as the organization's owner with a logged-in test instance `browser-test`: a key
 * created with one scope and used over HTTP until it is revoked, the usage and users pages, the CSRF check, the
 * dialogs that ask before a removal, a logout or a delete, and a viewer who may read keys but not create them. The
 * flow from sign-in to a redelivered webhook: browser.test.ts.
 */
if (chromiumAvailable) {
  describe('dashboard keys, users and confirmations in Chromium', () => {
    let t: TestApp;
    let viewer: string;
    let instanceId = '';
    let apiKey = '';
    const ui = chromiumSuite(
      async (defer) => {
        let owner: string;
        let url: string;
        ({ t, url, owner, instanceId } = await appWithLinkedInstance(defer));
        viewer = await createUser(t, 'viewer', 'viewer@example.com');
        return { url, signInAs: owner };
      },
      { clipboard: true },
    );

    it('creates a key with one scope, copies it, uses it over HTTP (403 on another scope), revokes it (401)', async () => {
      await ui.page.getByRole('link', { name: 'API keys' }).click();
      await ui.page.getByRole('heading', { name: 'API keys' }).waitFor();
      await ui.page.getByLabel('Name').fill('browser key');
      // No scope is chosen for the user: the form cannot be sent until one is.
      const all = ui.page.getByRole('checkbox', { name: 'chat:*' });
      assert.equal(await all.isChecked(), false);
      assert.equal(await ui.page.getByRole('button', { name: 'Review key' }).isDisabled(), true);
      // chat:* and the narrower chat scopes exclude each other.
      await all.check();
      await ui.page.getByRole('checkbox', { name: 'chat:messages' }).check();
      assert.equal(await all.isChecked(), false, 'a narrower scope clears chat:*');
      await ui.page.getByRole('checkbox', { name: 'browser-test' }).check();
      await ui.page.getByLabel('Expires').selectOption('30d');
      await ui.page.getByRole('button', { name: 'Review key' }).click();
      const summary = ui.page.getByRole('region', { name: 'Key to create' });
      assert.equal(
        (await summary.locator('p').innerText()).replace(/\s+/g, ' '),
        'A test key named browser key with chat:messages, for browser-test, expiring in 30 days.',
      );
      await summary.getByRole('button', { name: 'Create key' }).click();
      const shown = ui.page.getByLabel('Your new key: shown only this once, store it now');
      await shown.waitFor();
      apiKey = await shown.inputValue();
      assert.match(apiKey, /^svc_test_[0-9A-Za-z]{38}$/);
      await ui.page.getByRole('button', { name: 'Copy key' }).click();
      await ui.notice('Copied to the clipboard');
      assert.equal(await ui.page.evaluate(() => (globalThis as any).navigator.clipboard.readText()), apiKey);
      await screenshots(ui.page, 'keys');

      const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
      const send = await fetch(`${ui.url}/v1/messages/send`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ from: instanceId, phone: '5511988887777', body: 'sent with the new key' }),
      });
      assert.equal(send.status, 200);
      const other = await fetch(`${ui.url}/v1/session/status?from=${instanceId}`, { headers });
      assert.equal(other.status, 403);
      assert.deepEqual(await other.json(), {
        error: { code: 403, message: 'API key lacks required scope chat:session' },
      });

      // Revoking asks first: Cancel keeps the key working.
      const revokeButton = ui.page.getByRole('button', { name: `Revoke key ${apiKey.slice(0, 12)}` });
      await revokeButton.click();
      const dialog = ui.page.getByRole('dialog', { name: `Revoke key ${apiKey.slice(0, 12)}…?` });
      await dialog.waitFor();
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'hidden' });
      const still = await fetch(`${ui.url}/v1/messages/send`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ from: instanceId, phone: '5511988887777', body: 'still allowed' }),
      });
      assert.equal(still.status, 200);
      await revokeButton.click();
      await dialog.getByRole('button', { name: 'Revoke key' }).click();
      await ui.notice(/revoked/);
      const revoked = await fetch(`${ui.url}/v1/messages/send`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ from: instanceId, phone: '5511988887777', body: 'after revocation' }),
      });
      assert.equal(revoked.status, 401);
      assert.deepEqual(await revoked.json(), { error: { code: 401, message: 'invalid API key' } });
    });

    it('shows usage and users; refuses a state change without the CSRF token', async () => {
      await ui.page.getByRole('link', { name: 'Instances' }).click();
      await ui.page.getByRole('row').filter({ hasText: 'browser-test' }).getByText('Logged in').waitFor();
      await screenshots(ui.page, 'instances');
      await ui.page.getByRole('link', { name: 'Usage' }).click();
      await ui.page.getByRole('heading', { name: 'Usage' }).waitFor();
      await ui.page
        .getByText(/This minute: [1-9]\d* of 60 used/)
        .first()
        .waitFor();
      await screenshots(ui.page, 'usage');
      await ui.page.getByRole('link', { name: 'Users' }).click();
      await ui.page.getByRole('heading', { name: 'Users' }).waitFor();
      await ui.page.getByRole('cell', { name: viewer, exact: true }).waitFor();
      await screenshots(ui.page, 'users');
      await ui.page.getByRole('link', { name: 'Change password' }).click();
      await ui.page.getByRole('heading', { name: 'Your password' }).waitFor();
      await screenshots(ui.page, 'password');
      await ui.page.getByRole('link', { name: 'Users' }).click();
      await ui.page.getByRole('cell', { name: viewer, exact: true }).waitFor();
      const status = await ui.page.evaluate(async () => {
        const res = await fetch('/dashboard/api/keys', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ env: 'test', scopes: ['chat:*'] }),
        });
        return { status: res.status, body: await res.json() };
      });
      assert.deepEqual(status, {
        status: 403,
        body: { error: { code: 403, message: 'missing or invalid CSRF token' } },
      });
    });

    it('asks before removing a user, logging out and deleting an instance; Cancel changes nothing', async () => {
      const doomed = await createUser(t, 'member', 'doomed@example.com');
      // The users page may be the one shown already: reload it to list the new user.
      await ui.page.reload();
      await ui.page.getByRole('link', { name: 'Users' }).click();
      await ui.page.getByRole('cell', { name: doomed, exact: true }).waitFor();
      const remove = ui.page.getByRole('button', { name: `Remove ${doomed}` });
      await remove.click();
      const removeDialog = ui.page.getByRole('dialog', { name: `Remove ${doomed}?` });
      await removeDialog.waitFor();
      // The dialog takes the focus (its first button), shows the focus ring when tabbed to, and Escape closes it and
      // gives the focus back to the button that opened it.
      const focused = () =>
        ui.page.evaluate(() => {
          const g = globalThis as any;
          const active = g.document.activeElement;
          if (!active) return null;
          const style = g.getComputedStyle(active);
          return {
            inDialog: active.closest('dialog') !== null,
            text: active.textContent,
            ring: `${style.outlineStyle} ${style.outlineWidth}`,
          };
        });
      assert.deepEqual(
        { ...(await focused()), ring: undefined },
        { inDialog: true, text: 'Remove user', ring: undefined },
      );
      await ui.page.keyboard.press('Tab');
      assert.deepEqual(await focused(), { inDialog: true, text: 'Cancel', ring: 'solid 3px' });
      await screenshots(ui.page, 'confirm-remove-user');
      await ui.page.keyboard.press('Escape');
      await removeDialog.waitFor({ state: 'hidden' });
      assert.equal((await focused())?.text, 'Remove');
      assert.equal(await ui.page.getByRole('cell', { name: doomed, exact: true }).count(), 1);
      await remove.click();
      await removeDialog.getByRole('button', { name: 'Remove user' }).click();
      await ui.notice('User removed');
      await ui.page.getByRole('cell', { name: doomed, exact: true }).waitFor({ state: 'detached' });

      // Another instance to log out and delete (live: the plan's two test instances exist already).
      await ui.page.getByRole('link', { name: 'Instances' }).click();
      await ui.page.getByRole('heading', { name: 'Instances' }).waitFor();
      await ui.page.getByLabel('Name').fill('to-delete');
      await ui.page.getByLabel('Environment').selectOption('live');
      await ui.page.getByRole('button', { name: 'Create instance' }).click();
      await ui.page.getByRole('link', { name: 'to-delete' }).click();
      const doomedId = decodeURIComponent(new URL(ui.page.url()).hash.split('/').pop() ?? '');
      await ui.page.getByRole('heading', { name: /to-delete/ }).waitFor();
      await ui.page.getByRole('button', { name: 'Log out' }).click();
      const logout = ui.page.getByRole('dialog', { name: 'Log out to-delete?' });
      await logout.waitFor();
      await logout.getByRole('button', { name: 'Cancel' }).click();
      await logout.waitFor({ state: 'hidden' });
      await ui.page.getByRole('button', { name: 'Delete instance' }).click();
      const deletion = ui.page.getByRole('dialog', { name: 'Delete to-delete?' });
      await deletion.getByRole('button', { name: 'Cancel' }).click();
      assert.ok(
        await t.services.store.db
          .selectFrom('instances')
          .select('id')
          .where('id', '=', doomedId)
          .executeTakeFirst(),
      );
      await ui.page.getByRole('button', { name: 'Delete instance' }).click();
      await deletion.getByRole('button', { name: 'Delete instance' }).click();
      await ui.page.getByRole('heading', { name: 'Instances' }).waitFor();
      assert.equal(
        await t.services.store.db
          .selectFrom('instances')
          .select('id')
          .where('id', '=', doomedId)
          .executeTakeFirst(),
        undefined,
      );
      await ui.page.getByRole('link', { name: 'browser-test' }).waitFor();
      assert.equal(await ui.page.getByRole('link', { name: 'to-delete' }).count(), 0);
    });

    it('a viewer sees keys but cannot create one', async () => {
      await ui.page.getByRole('button', { name: 'Sign out' }).click();
      await ui.page.getByRole('heading', { name: 'Sign in to parley' }).waitFor();
      await ui.signIn(viewer, PASSWORD);
      await ui.page.getByRole('heading', { name: 'Instances' }).waitFor();
      assert.equal(await ui.page.getByRole('button', { name: 'Create instance' }).count(), 0);
      await ui.page.getByRole('link', { name: 'API keys' }).click();
      await ui.page.getByRole('heading', { name: 'API keys' }).waitFor();
      await ui.page.getByRole('cell', { name: 'browser key', exact: true }).waitFor();
      assert.equal(await ui.page.getByRole('button', { name: 'Create key' }).count(), 0);
      assert.equal(await ui.page.getByRole('link', { name: 'Users' }).count(), 0);
      const attempt = await ui.page.evaluate(async () => {
        const me: any = await (await fetch('/dashboard/api/me')).json();
        const res = await fetch('/dashboard/api/keys', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-csrf-token': me.data.csrfToken },
          body: JSON.stringify({ env: 'test', scopes: ['chat:*'] }),
        });
        return { status: res.status, body: await res.json() };
      });
      assert.deepEqual(attempt, {
        status: 403,
        body: { error: { code: 403, message: 'this needs the member role (you are viewer)' } },
      });
    });
  });
}
