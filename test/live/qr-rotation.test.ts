/**
 * QR rotation of a live instance through parley's HTTP API against the platform simulator, on Baileys' real
 * schedule (the first code lives 60 s): the code rotates while the status stays `connected, not logged in`, the
 * code that rotated away is refused by the phone, the new one links. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set; the dialects run side by side, so the file costs one rotation of wall time.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { ManualClock } from '../support/app.ts';
import { decodeQr } from '../support/qr.ts';
import { testDialects } from '../support/store.ts';
import { companion, control, liveApp, startTestSimulator, WAIT_MS, waitForStatus } from './support.ts';

/** A clock that follows real time (the live engine stamps QR expiry on Baileys' own timer). */
function wallClock(): ManualClock {
  let offset = 0;
  const clock = (() => Date.now() + offset) as ManualClock;
  clock.advance = (ms) => {
    offset += ms;
  };
  clock.set = (ms) => {
    offset = ms - Date.now();
  };
  return clock;
}

describe('live QR rotation through parley’s API against the simulator', { concurrency: true }, () => {
  for (const dialect of testDialects()) {
    // No bound of its own: the code's 60 s and the waits' safety nets bound it (the runner's bound on each test,
    // scripts/test.js, would not name what was awaited).
    it(`the code rotates after 60 s, the old code is refused, the new one links (${dialect})`, async (t: TestContext) => {
      const phone = dialect === 'sqlite' ? '5511977770001' : '5511977770002';
      const sim = await startTestSimulator();
      const app = await liveApp(sim, { dialect, clock: wallClock() }).catch(async (error: unknown) => {
        await sim.close();
        throw error;
      });
      t.after(async () => {
        await app.t.close();
        await sim.close();
      });
      assert.equal((await control(sim, 'POST', '/users', { phone })).status, 201);

      const connect = await app.live('POST', '/v1/session/connect');
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      const first = await app.live('GET', '/v1/session/qr');
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const oldCode: string = first.body.data.code;
      const oldExpiry = Date.parse(first.body.data.expiresAt);
      assert.equal(decodeQr(first.body.data.qrCode), oldCode);
      assert.ok(oldExpiry > Date.now() && oldExpiry <= Date.now() + 60_000, first.body.data.expiresAt);

      // Poll once a second until the code changes; meanwhile the instance stays connected, not logged in. Baileys
      // shows the first code until its expiry (60 s): the wait ends at the rotation, with the safety net of every
      // wait past that expiry (a loaded machine runs the rotation's timer late).
      const deadline = oldExpiry + WAIT_MS;
      let next: { code: string; expiresAt: string; qrCode: string } | undefined;
      while (next === undefined) {
        const status = await app.live('GET', '/v1/session/status');
        assert.equal(status.status, 200, JSON.stringify(status.body));
        assert.equal(status.body.data.connected, true, JSON.stringify(status.body));
        assert.equal(status.body.data.loggedIn, false, JSON.stringify(status.body));
        const qr = await app.live('GET', '/v1/session/qr');
        assert.equal(qr.status, 200, JSON.stringify(qr.body));
        if (qr.body.data.code !== oldCode) next = qr.body.data;
        else {
          assert.equal(Date.parse(qr.body.data.expiresAt), oldExpiry, 'the first code keeps its expiry');
          assert.ok(Date.now() < deadline, `no new QR code within ${WAIT_MS} ms of the first one's expiry`);
          await delay(1_000);
        }
      }
      const newCode = next.code;
      const newExpiry = Date.parse(next.expiresAt);
      assert.notEqual(newCode, oldCode);
      assert.equal(decodeQr(next.qrCode), newCode);
      // Same companion keys, another ref: `<ref>,<noise key>,<identity key>,<adv secret>,<platform>`.
      const [oldRef, ...oldKeys] = oldCode.split(',');
      const [newRef, ...newKeys] = newCode.split(',');
      assert.notEqual(newRef, oldRef);
      assert.deepEqual(newKeys, oldKeys);
      assert.ok(
        newExpiry > oldExpiry,
        `expiry moved forward: ${first.body.data.expiresAt} → ${next.expiresAt}`,
      );
      assert.ok(newExpiry <= Date.now() + 20_000, `the next codes live 20 s: ${next.expiresAt}`);

      const stale = await control(sim, 'POST', '/scan', { code: oldCode, phone });
      assert.deepEqual(stale, {
        status: 404,
        body: {
          error: { code: 404, message: 'code: this QR code expired, scan the one the companion shows now' },
        },
      });
      assert.deepEqual(
        (await control(sim, 'GET', `/accounts/${phone}`)).body.devices,
        [{ id: 0, linked: true, sockets: 0 }],
        'no device linked by the stale code',
      );
      const waiting = await app.status();
      assert.equal(waiting.connected, true, JSON.stringify(waiting));
      assert.equal(waiting.loggedIn, false, JSON.stringify(waiting));

      const scan = await control(sim, 'POST', '/scan', { code: newCode, phone });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      assert.equal(scan.body.jid, `${phone}:1@s.whatsapp.net`);
      const state = await waitForStatus(app, true, true);
      assert.equal(state.jid, `${phone}:1@s.whatsapp.net`);
      assert.deepEqual(await companion(sim, phone), { id: 1, linked: true, sockets: 1 });
    });
  }
});
