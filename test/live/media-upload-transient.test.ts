/**
 * A queued (Prefer: respond-async) media send whose upload fails because the platform's media host cannot
 * be reached for a moment. docs/decisions/0009-sends-as-jobs.md: "Transient failures (session away, platform
 * unreachable, store errors) retry with backoff ... a refusal fails the job with the platform's reason".
 * A media host that refuses connections is the platform being unreachable, not a refusal: the job must be retried
 * and go out once the host is back, not be failed for good.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/media/${name}`, import.meta.url));

/** A TCP port nothing listens on. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return address.port;
}

for (const dialect of testDialects()) {
  describe(`a queued media send whose media host is briefly unreachable (${dialect})`, () => {
    let sim: Simulator;
    let app: LiveApp;
    const shop = '5511999990000';
    const ana = '5511988887777';

    before(async () => {
      sim = await startTestSimulator();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await pairLive(sim, app, shop);
    });
    after(async () => {
      await app.t.close();
      await sim.close();
    });

    it('is retried and sent once the host answers again, not failed for good', async () => {
      const port = await deadPort();
      const media = sim.media;
      const original = media.mediaConn.bind(media);
      let outages = 1;
      // The first media_conn answer names a host that refuses connections (and expires at once).
      media.mediaConn = () => {
        const conn = original();
        if (outages <= 0) return conn;
        outages -= 1;
        return { ...conn, hostname: `127.0.0.1:${port}`, ttlSeconds: 0 };
      };
      const res = await app.t.call(
        'POST',
        `/v1/messages/send/image?from=${app.instanceId}`,
        { phone: ana, image: `data:image/jpeg;base64,${fixture('tiny.jpg').toString('base64')}` },
        { authorization: `Bearer ${app.liveKey}`, prefer: 'respond-async' },
      );
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const id: string = res.body.data.id;
      const final = await until('the job to end', async () => {
        // parley's clock is frozen in these tests: let the retry's backoff pass.
        app.t.clock.advance(500);
        const got = await app.live('GET', `/v1/messages/${id}`);
        const status = got.body?.data?.status;
        return status === 'pending' || status === undefined ? undefined : got.body.data;
      });
      assert.equal(outages, 0, 'the outage was hit');
      assert.notEqual(final.status, 'failed', `the job failed for good: ${JSON.stringify(final)}`);
      await until('the image in the inbox', () =>
        sim.context.accounts.get(ana)?.inbox.find((e) => e.id === id),
      );
    });
  });
}
