/**
 * Connections that went silent both ways (a proxy between parley and the simulator frozen: nothing arrives, nothing
 * closes), over real sockets (docs/decisions/0025-live-engine.md: a closing handshake is bounded). Whoever ends such a
 * connection, Baileys' keep-alive or a disconnect, a close frame is never answered; the `ws` library destroys the
 * socket only after 30 s. Before, the keep-alive's close waited those 30 s before the session was reported
 * disconnected and reconnected (the number looked connected while it was dead), and a disconnect kept the socket open
 * that long after the one-socket lock was given up. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { CLOSE_HANDSHAKE_MS } from '../../src/engines/baileys/socket.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { testDialects } from '../support/store.ts';
import {
  companion,
  type LiveApp,
  liveApp,
  simulatorAccounts,
  startTestSimulator,
  until,
  waitForStatus,
} from './support.ts';

/** Keep-alive interval the engine is configured with here, ms. */
const KEEP_ALIVE_MS = 1_000;
/** Baileys declares the connection lost once nothing arrived for the interval plus this, ms (Socket/socket.js). */
const BAILEYS_GRACE_MS = 5_000;
/** Slack for a loaded machine, ms. */
const SLACK_MS = 10_000;
/** The `ws` library's wait for a close frame the peer never answers, ms: what a close waited before. */
const WS_CLOSE_TIMEOUT_MS = 30_000;

for (const dialect of testDialects()) {
  describe(`live connections that went silent both ways (${dialect})`, () => {
    let sim: Simulator;
    let proxy: FlightProxy;
    let app: LiveApp;
    const { linkedPair } = simulatorAccounts(
      () => sim,
      () => app,
      5511974000000,
    );
    const lockRow = () =>
      app.t.services.store.db
        .selectFrom('instance_locks')
        .select('owner')
        .where('instance_id', '=', app.instanceId)
        .executeTakeFirst();

    before(async () => {
      sim = await startTestSimulator();
      proxy = await startFlightProxy({ host: '127.0.0.1', port: sim.port });
      const viaProxy: Simulator = { ...sim, url: `ws://127.0.0.1:${proxy.port}/ws/chat` };
      app = await liveApp(viaProxy, { dialect, tuning: { keepAliveIntervalMs: KEEP_ALIVE_MS } });
    });
    after(async () => {
      await app.t.close();
      await proxy.close();
      await sim.close();
    });

    it("the keep-alive's close: reported disconnected (408) within its bound, then logged in again", async () => {
      const { account } = await linkedPair();
      proxy.freeze();
      // Baileys checks once per interval and gives up after interval + 5 s of nothing; its close then waits at most
      // CLOSE_HANDSHAKE_MS for the frozen peer. Before, it waited 30 s more.
      const bound = 2 * KEEP_ALIVE_MS + BAILEYS_GRACE_MS + CLOSE_HANDSHAKE_MS + SLACK_MS;
      assert.ok(bound < WS_CLOSE_TIMEOUT_MS, 'the bound is well under a closing handshake left to ws');
      const status = await until(
        'the frozen connection reported lost',
        async () => {
          const s = await app.status();
          return s.connected === false ? s : undefined;
        },
        bound,
      );
      assert.equal(status.loggedIn, true);
      assert.match(status.reason ?? '', /^connection lost or timed out \(408\); reconnecting in /);
      // New connections go through the proxy as before: the session logs in again, one socket left.
      const s = await waitForStatus(app, true, true);
      assert.equal(s.jid, `${account}:1@s.whatsapp.net`);
      await until('the frozen socket gone on the platform', async () =>
        (await companion(sim, account)).sockets === 1 ? true : undefined,
      );
    });

    it('a disconnect: answered within the bound, its socket closed when the lock is given up', async () => {
      const { account } = await linkedPair();
      assert.equal((await companion(sim, account)).sockets, 1);
      proxy.freeze();
      const t0 = Date.now();
      const disconnected = await app.live('POST', '/v1/session/disconnect');
      assert.equal(disconnected.status, 200, JSON.stringify(disconnected.body));
      assert.ok(Date.now() - t0 < CLOSE_HANDSHAKE_MS + SLACK_MS, 'answered within the close bound');
      assert.equal(await lockRow(), undefined, 'the one-socket lock is given up');
      // The socket was destroyed before the lock was given up: the platform sees it gone at once, not 30 s later.
      await until(
        'the frozen socket gone on the platform',
        async () => ((await companion(sim, account)).sockets === 0 ? true : undefined),
        CLOSE_HANDSHAKE_MS,
      );
      const status = await app.status();
      assert.equal(status.connected, false);
      assert.equal(status.loggedIn, true);
      // A connect right after logs in on a new socket, the only one.
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
      assert.equal((await companion(sim, account)).sockets, 1);
    });
  });
}
