import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createWebhookApp } from '../webhooks/support.ts';

/**
 * Broker endpoint URLs through the API (docs/decisions/0037-broker-endpoints.md): what is accepted, how a password
 * or token is masked and sealed, and what is refused. Nothing here connects to a broker.
 */

/** A name no other test uses. */
function unique(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2)}`;
}

/** Creates an endpoint through the API, asserting 201. */
async function createEndpoint(t: TestApp, body: Record<string, unknown>) {
  const response = await t.call('POST', '/v1/webhooks', body);
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.data as { id: string; url: string; secret: string };
}

for (const dialect of testDialects()) {
  describe(`broker endpoint URLs (${dialect})`, () => {
    let t: TestApp;
    beforeEach(async () => {
      t = await createWebhookApp({ dialect });
    });
    afterEach(async () => {
      await t.close();
    });

    it('shows a broker URL with its password masked and keeps the whole URL sealed', async () => {
      const exchange = unique('parley-mask');
      const raw = `amqp://guest:guest@127.0.0.1:5672/?exchange=${exchange}`;
      const created = await createEndpoint(t, { url: raw, events: ['Message'] });
      const shown = `amqp://guest:****@127.0.0.1:5672/?exchange=${exchange}`;
      assert.equal(created.url, shown);
      const read = await t.call('GET', `/v1/webhooks/${created.id}`);
      assert.equal(read.body.data.url, shown);
      const row = await t.services.store.db
        .selectFrom('webhook_endpoints')
        .select(['url', 'url_sealed'])
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      assert.equal(row.url, shown);
      assert.ok(row.url_sealed !== null && !row.url_sealed.includes('guest:guest'));
      assert.equal(t.services.box.open(row.url_sealed), raw);
      // Sending back the URL as shown changes nothing; a new URL replaces both.
      const same = await t.call('PATCH', `/v1/webhooks/${created.id}`, { url: shown, description: 'd' });
      assert.equal(same.status, 200, JSON.stringify(same.body));
      const kept = await t.services.store.db
        .selectFrom('webhook_endpoints')
        .select('url_sealed')
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      assert.equal(kept.url_sealed, row.url_sealed);
      const plain = await t.call('PATCH', `/v1/webhooks/${created.id}`, { url: 'nats://127.0.0.1:4222' });
      assert.equal(plain.body.data.url, 'nats://127.0.0.1:4222');
      const replaced = await t.services.store.db
        .selectFrom('webhook_endpoints')
        .select(['url', 'url_sealed'])
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(replaced, { url: 'nats://127.0.0.1:4222', url_sealed: null });
      const token = await createEndpoint(t, { url: 'nats://s3cret@127.0.0.1:4222', events: ['Message'] });
      assert.equal(token.url, 'nats://****@127.0.0.1:4222');
    });

    it('a masked URL sent back with another part changed keeps the stored secret, for the same login only', async () => {
      const db = t.services.store.db;
      const stored = async (id: string) => {
        const row = await db
          .selectFrom('webhook_endpoints')
          .select(['url', 'url_sealed'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return { url: row.url, whole: row.url_sealed === null ? null : t.services.box.open(row.url_sealed) };
      };
      const patch = (id: string, url: string) => t.call('PATCH', `/v1/webhooks/${id}`, { url });
      const maskedPassword = 'url carries the masked password ****: send the password';

      // RabbitMQ: the exchange, then the vhost (with the mask percent-encoded) changed; the password stays.
      const amqp = await createEndpoint(t, {
        url: 'amqp://parley:s3cret@127.0.0.1:5672/?exchange=orders',
        events: ['Message'],
      });
      assert.equal(amqp.url, 'amqp://parley:****@127.0.0.1:5672/?exchange=orders');
      const exchanged = await patch(amqp.id, amqp.url.replace('exchange=orders', 'exchange=billing'));
      assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
      assert.equal(exchanged.body.data.url, 'amqp://parley:****@127.0.0.1:5672/?exchange=billing');
      assert.deepEqual(await stored(amqp.id), {
        url: 'amqp://parley:****@127.0.0.1:5672/?exchange=billing',
        whole: 'amqp://parley:s3cret@127.0.0.1:5672/?exchange=billing',
      });
      const moved = await patch(amqp.id, 'amqp://parley:%2A%2A%2A%2A@127.0.0.1/events?exchange=billing');
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      assert.equal((await stored(amqp.id)).whole, 'amqp://parley:s3cret@127.0.0.1/events?exchange=billing');

      // Another host, port, scheme or user: the stored password is not handed to it; the mask is never stored.
      const before = await stored(amqp.id);
      for (const url of [
        'amqp://parley:****@127.0.0.2/events?exchange=billing',
        'amqp://parley:****@127.0.0.1:5673/events?exchange=billing',
        'amqps://parley:****@127.0.0.1:5672/events?exchange=billing',
        'amqp://other:****@127.0.0.1/events?exchange=billing',
        'nats://parley:****@127.0.0.1:5672',
      ]) {
        const refused = await patch(amqp.id, url);
        assert.equal(refused.status, 400, url);
        assert.deepEqual(refused.body, { error: { code: 400, message: maskedPassword } }, url);
      }
      assert.deepEqual(await stored(amqp.id), before);

      // NATS: a token, and a user's password, kept through a rewritten URL (a trailing slash, the default port).
      const token = await createEndpoint(t, { url: 'nats://t0ken@127.0.0.1:4222', events: ['Message'] });
      const tokenKept = await patch(token.id, 'nats://****@127.0.0.1:4222/');
      assert.equal(tokenKept.status, 200, JSON.stringify(tokenKept.body));
      assert.equal((await stored(token.id)).whole, 'nats://t0ken@127.0.0.1:4222/');
      const user = await createEndpoint(t, { url: 'nats://u:pw@127.0.0.1:4222', events: ['Message'] });
      const userKept = await patch(user.id, 'nats://u:****@127.0.0.1');
      assert.equal(userKept.status, 200, JSON.stringify(userKept.body));
      assert.equal((await stored(user.id)).whole, 'nats://u:pw@127.0.0.1');
      // A token where the stored URL had a password (and the other way round) is another login.
      const tokenForUser = await patch(user.id, 'nats://****@127.0.0.1');
      assert.deepEqual(tokenForUser.body, {
        error: { code: 400, message: 'url carries the masked token ****: send the token' },
      });
      assert.equal((await patch(token.id, 'nats://u:****@127.0.0.1:4222')).status, 400);

      // No stored secret to stand for: an endpoint without one, and a new endpoint.
      const open = await createEndpoint(t, { url: 'amqp://127.0.0.1/', events: ['Message'] });
      assert.deepEqual((await patch(open.id, 'amqp://guest:****@127.0.0.1/')).body, {
        error: { code: 400, message: maskedPassword },
      });
      const copied = await t.call('POST', '/v1/webhooks', { url: amqp.url, events: ['Message'] });
      assert.deepEqual(copied.body, { error: { code: 400, message: maskedPassword } });
    });

    it('refuses bad broker URLs and blocked broker hosts, naming the field and the rule', async () => {
      const cases: [string, string][] = [
        [
          'amqp://127.0.0.1/?exchange=x&durable=1',
          'url is not a valid broker URL: URL query parameter durable is not supported (only exchange)',
        ],
        [
          'amqp://127.0.0.1/?exchange=a%20b',
          'url is not a valid broker URL: URL exchange must be 1 to 255 letters, digits, hyphens, underscores, periods or colons',
        ],
        [
          'amqp://127.0.0.1/a/b',
          'url is not a valid broker URL: URL vhost must be one path segment (write / as %2F)',
        ],
        ['nats://127.0.0.1:4222/stream', 'url is not a valid broker URL: nats URL must not have a path'],
        ['nats://:pw@127.0.0.1', 'url is not a valid broker URL: URL has a password but no user'],
        ['amqp://10.1.2.3', 'url is refused: the host does not resolve to an allowed public address'],
        ['ftp://example.com/x', 'url must be an HTTPS URL or an amqp://, amqps:// or nats:// broker URL'],
      ];
      for (const [url, message] of cases) {
        const response = await t.call('POST', '/v1/webhooks', { url, events: ['Message'] });
        assert.equal(response.status, 400, url);
        assert.equal(response.body.error.message, message, url);
      }
      const rows = await t.services.store.db.selectFrom('webhook_endpoints').select('id').execute();
      assert.equal(rows.length, 0);
    });
  });
}
